/* The embedded CPython behind the Java API.
 *
 * Start-up (once per process, from NativeLibrary.load): re-open libpython RTLD_GLOBAL, because
 * System.loadLibrary loads this library and its dependencies privately and numpy's extension modules resolve
 * Python's symbols globally; start the interpreter with the configured executable as its program name, so that
 * getpath and `site` find its prefix, a venv's pyvenv.cfg and the site-packages .pth files (an editable install
 * of the package is found there, not through PYTHONPATH); leave the signals to the JVM; run bridge.py (compiled
 * in) as the module `_mslite_jni`. The interpreter is never finalized: other Java threads may still call in.
 *
 * Calls: every native method takes the GIL with its OS thread's own PyThreadState, created on the thread's first
 * call and deleted when the thread exits (a pthread key destructor), and releases it before returning.
 */
#define _GNU_SOURCE
#include "embed.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MSLITE_DEFAULT_PYTHON
#error "define MSLITE_DEFAULT_PYTHON as the path of the Python executable to embed by default"
#endif
#ifndef MSLITE_BRIDGE_PY
#error "define MSLITE_BRIDGE_PY as the absolute path of native/bridge.py"
#endif

/* bridge.py as a NUL-terminated string in .rodata */
__asm__(".section .rodata\n"
        ".hidden mslite_bridge_source\n"
        ".type mslite_bridge_source, @object\n"
        "mslite_bridge_source:\n"
        ".incbin \"" MSLITE_BRIDGE_PY "\"\n"
        ".byte 0\n"
        ".previous\n");
extern const char mslite_bridge_source[];

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define JAVA_UTF16 "utf-16-le"
#define JAVA_UTF16_ORDER (-1)
#else
#define JAVA_UTF16 "utf-16-be"
#define JAVA_UTF16_ORDER 1
#endif

enum { NOT_STARTED = 0, RUNNING = 1, FAILED = -1 };
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static int state = NOT_STARTED;
static char failure[4096];
static PyObject *bridge;                   /* the _mslite_jni module */
static PyInterpreterState *interpreter;
static PyThreadState *first_thread;        /* made by Py_Initialize in the starting thread; kept for good */
static pthread_key_t thread_key;
static jclass exception_class;
static jmethodID exception_init;

static int fail(const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(failure, sizeof failure, format, args);
    va_end(args);
    return -1;
}

static void drop_thread_state(void *thread_state) {
    if (thread_state == first_thread) return;
    PyEval_RestoreThread(thread_state);
    PyThreadState_Clear(thread_state);
    PyThreadState_DeleteCurrent();
}

static int promote_libpython(void) {
    Dl_info info;
    if (!dladdr((void *)&Py_InitializeFromConfig, &info) || !info.dli_fname)
        return fail("cannot locate the loaded libpython");
    if (!dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD))
        return fail("cannot re-open %s with RTLD_GLOBAL: %s", info.dli_fname, dlerror());
    return 0;
}

/* The pending Python exception as text (GIL held; clears it). */
static void python_error_text(char *out, size_t size) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    PyObject *text = value ? PyObject_Str(value) : NULL;
    const char *message = text ? PyUnicode_AsUTF8(text) : NULL;
    snprintf(out, size, "%s: %s", type ? ((PyTypeObject *)type)->tp_name : "error", message ? message : "?");
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    PyErr_Clear();
}

static int start_python(const char *python) {
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0;    /* the JVM owns the signals */
    config.parse_argv = 0;
    PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, python);
    if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(status))
        return fail("cannot start Python '%s': %s", python, status.err_msg ? status.err_msg : "unknown error");
    PyObject *code = Py_CompileString(mslite_bridge_source, "jni/native/bridge.py", Py_file_input);
    bridge = code ? PyImport_ExecCodeModuleEx("_mslite_jni", code, "jni/native/bridge.py") : NULL;
    Py_XDECREF(code);
    if (!bridge) {
        char error[3000];
        python_error_text(error, sizeof error);
        PyObject *sys_path = PySys_GetObject("path");
        PyObject *path_text = sys_path ? PyObject_Str(sys_path) : NULL;
        fail("cannot import the MindSpore Lite Python package 'lite' with Python '%s' (%s); install mslite-py "
             "into that interpreter (pip install -e .) or name another one with -Dmindspore.lite.python=... or "
             "MSLITE_PYTHON; sys.path = %s", python, error, path_text ? PyUnicode_AsUTF8(path_text) : "?");
        Py_XDECREF(path_text);
        PyErr_Clear();
        PyEval_SaveThread();
        return -1;
    }
    interpreter = PyInterpreterState_Get();
    first_thread = PyEval_SaveThread();
    pthread_setspecific(thread_key, first_thread);
    return 0;
}

static int cache_exception_class(JNIEnv *env) {
    jclass local = (*env)->FindClass(env, "com/mindspore/lite/LiteException");
    if (!local) return -1;
    exception_class = (*env)->NewGlobalRef(env, local);
    exception_init = (*env)->GetMethodID(env, local, "<init>", "(ILjava/lang/String;)V");
    (*env)->DeleteLocalRef(env, local);
    return exception_class && exception_init ? 0 : -1;
}

void embed_init(JNIEnv *env, jstring python) {
    pthread_mutex_lock(&start_lock);
    if (state == NOT_STARTED) {
        if (cache_exception_class(env) != 0) {           /* a Java error is pending */
            pthread_mutex_unlock(&start_lock);
            return;
        }
        const char *chosen = python ? (*env)->GetStringUTFChars(env, python, NULL) : NULL;
        const char *executable = chosen && *chosen ? chosen : MSLITE_DEFAULT_PYTHON;
        int ok = pthread_key_create(&thread_key, drop_thread_state) == 0;
        if (!ok) fail("pthread_key_create failed");
        ok = ok && promote_libpython() == 0 && start_python(executable) == 0;
        if (chosen) (*env)->ReleaseStringUTFChars(env, python, chosen);
        __atomic_store_n(&state, ok ? RUNNING : FAILED, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&start_lock);
    if (state == FAILED) throw_lite(env, RET_ERROR, failure);
}

int embed_enter(JNIEnv *env) {
    int current = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (current != RUNNING) {
        throw_lite(env, RET_ERROR, current == FAILED ? failure : "the MindSpore Lite native library is not started");
        return 0;
    }
    PyThreadState *thread_state = pthread_getspecific(thread_key);
    if (!thread_state) {
        thread_state = PyThreadState_New(interpreter);
        if (!thread_state) {
            throw_lite(env, RET_ERROR, "cannot create a Python thread state");
            return 0;
        }
        pthread_setspecific(thread_key, thread_state);
    }
    PyEval_RestoreThread(thread_state);
    return 1;
}

void embed_leave(void) { PyEval_SaveThread(); }

/* ---- errors -------------------------------------------------------------------------------------------------- */
static void throw_with(JNIEnv *env, int status, jstring message) {
    if (!message) return;                                 /* OutOfMemoryError pending */
    jclass cls = exception_class ? exception_class : (*env)->FindClass(env, "com/mindspore/lite/LiteException");
    jmethodID init = exception_init ? exception_init
                                    : (cls ? (*env)->GetMethodID(env, cls, "<init>", "(ILjava/lang/String;)V") : NULL);
    if (!init) return;
    jobject error = (*env)->NewObject(env, cls, init, (jint)status, message);
    if (error) (*env)->Throw(env, error);
}

void throw_lite(JNIEnv *env, int status, const char *message) {
    throw_with(env, status, (*env)->NewStringUTF(env, message));
}

static jstring java_string(JNIEnv *env, PyObject *text) {
    PyObject *utf16 = PyUnicode_Check(text) ? PyUnicode_AsEncodedString(text, JAVA_UTF16, "surrogatepass") : NULL;
    if (!utf16) {
        PyErr_Clear();
        return (*env)->NewStringUTF(env, "(not a string)");
    }
    jstring out = (*env)->NewString(env, (const jchar *)PyBytes_AS_STRING(utf16),
                                    (jsize)(PyBytes_GET_SIZE(utf16) / 2));
    Py_DECREF(utf16);
    return out;
}

/* The pending Python exception as a LiteException (status and message from bridge.describe). */
static void throw_python_error(JNIEnv *env) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if ((*env)->ExceptionCheck(env)) goto done;          /* a Java exception raised inside the call wins */
    PyErr_NormalizeException(&type, &value, &traceback);
    PyObject *described = value ? PyObject_CallMethod(bridge, "describe", "(O)", value) : NULL;
    if (described && PyTuple_Check(described) && PyTuple_GET_SIZE(described) == 2) {
        int status = (int)PyLong_AsLong(PyTuple_GET_ITEM(described, 0));
        throw_with(env, status, java_string(env, PyTuple_GET_ITEM(described, 1)));
    } else {
        throw_lite(env, RET_ERROR, "a Python error that could not be described");
    }
    Py_XDECREF(described);
done:
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    PyErr_Clear();
}

PyObject *embed_call(JNIEnv *env, const char *function, const char *format, ...) {
    va_list args;
    va_start(args, format);
    PyObject *arguments = Py_VaBuildValue(format, args);
    va_end(args);
    PyObject *callable = arguments ? PyObject_GetAttrString(bridge, function) : NULL;
    PyObject *result = callable ? PyObject_CallObject(callable, arguments) : NULL;
    Py_XDECREF(callable);
    Py_XDECREF(arguments);
    if (!result) throw_python_error(env);
    return result;
}

/* ---- Python -> Java --------------------------------------------------------------------------------------------- */
jlong as_long(JNIEnv *env, PyObject *result) {
    if (!result) return 0;
    long long value = PyLong_AsLongLong(result);
    Py_DECREF(result);
    if (value == -1 && PyErr_Occurred()) throw_python_error(env);
    return (jlong)value;
}

jboolean as_bool(JNIEnv *env, PyObject *result) {
    if (!result) return JNI_FALSE;
    int value = PyObject_IsTrue(result);
    Py_DECREF(result);
    if (value < 0) throw_python_error(env);
    return value > 0 ? JNI_TRUE : JNI_FALSE;
}

jstring as_string(JNIEnv *env, PyObject *result) {
    if (!result) return NULL;
    jstring out = java_string(env, result);
    Py_DECREF(result);
    return out;
}

void as_void(PyObject *result) { Py_XDECREF(result); }

/* The integers of a list `result` (stolen), or NULL with an exception thrown; `*count` gets the length. */
static long long *integers(JNIEnv *env, PyObject *result, jsize *count) {
    if (!result) return NULL;
    Py_ssize_t n = PyList_Check(result) ? PyList_GET_SIZE(result) : -1;
    long long *values = n >= 0 ? malloc(sizeof(long long) * (size_t)(n ? n : 1)) : NULL;
    for (Py_ssize_t i = 0; values && i < n; i++) values[i] = PyLong_AsLongLong(PyList_GET_ITEM(result, i));
    Py_DECREF(result);
    if (!values || PyErr_Occurred()) {
        free(values);
        if (PyErr_Occurred()) throw_python_error(env);
        else throw_lite(env, RET_ERROR, "expected a list of integers");
        return NULL;
    }
    *count = (jsize)n;
    return values;
}

jlongArray as_long_array(JNIEnv *env, PyObject *result) {
    jsize n = 0;
    long long *values = integers(env, result, &n);
    jlongArray out = values ? (*env)->NewLongArray(env, n) : NULL;
    if (out) (*env)->SetLongArrayRegion(env, out, 0, n, (const jlong *)values);
    free(values);
    return out;
}

jintArray as_int_array(JNIEnv *env, PyObject *result) {
    jsize n = 0;
    long long *values = integers(env, result, &n);
    jint *narrow = (jint *)values;          /* narrowed in place: element i is read before it is overwritten */
    for (jsize i = 0; narrow && i < n; i++) narrow[i] = (jint)values[i];
    jintArray out = values ? (*env)->NewIntArray(env, n) : NULL;
    if (out) (*env)->SetIntArrayRegion(env, out, 0, n, narrow);
    free(values);
    return out;
}

jobjectArray as_string_array(JNIEnv *env, PyObject *result) {
    if (!result) return NULL;
    jclass string_class = (*env)->FindClass(env, "java/lang/String");
    Py_ssize_t n = PyList_Check(result) ? PyList_GET_SIZE(result) : 0;
    jobjectArray out = string_class ? (*env)->NewObjectArray(env, (jsize)n, string_class, NULL) : NULL;
    for (Py_ssize_t i = 0; out && i < n; i++) {
        jstring item = java_string(env, PyList_GET_ITEM(result, i));
        if (!item) {
            out = NULL;
            break;
        }
        (*env)->SetObjectArrayElement(env, out, (jsize)i, item);
        (*env)->DeleteLocalRef(env, item);
    }
    Py_DECREF(result);
    return out;
}

/* ---- Java -> Python --------------------------------------------------------------------------------------------- */
PyObject *py_string(JNIEnv *env, jstring text) {
    if (!text) {
        throw_lite(env, RET_PARAM_INVALID, "a String argument is null");
        return NULL;
    }
    const jchar *chars = (*env)->GetStringChars(env, text, NULL);
    if (!chars) return NULL;
    int order = JAVA_UTF16_ORDER;
    PyObject *out = PyUnicode_DecodeUTF16((const char *)chars, (Py_ssize_t)(*env)->GetStringLength(env, text) * 2,
                                          "surrogatepass", &order);
    (*env)->ReleaseStringChars(env, text, chars);
    if (!out) throw_python_error(env);
    return out;
}

PyObject *py_long_list(JNIEnv *env, jlongArray values) {
    if (!values) {
        throw_lite(env, RET_PARAM_INVALID, "an array argument is null");
        return NULL;
    }
    jsize n = (*env)->GetArrayLength(env, values);
    jlong *items = (*env)->GetLongArrayElements(env, values, NULL);
    PyObject *out = items ? PyList_New(n) : NULL;
    for (jsize i = 0; out && i < n; i++) PyList_SET_ITEM(out, i, PyLong_FromLongLong((long long)items[i]));
    if (items) (*env)->ReleaseLongArrayElements(env, values, items, JNI_ABORT);
    if (items && !out) throw_python_error(env);
    return out;
}

/* One row of dims as a list of ints (GIL held). */
static PyObject *py_int_list(JNIEnv *env, jintArray row) {
    jsize n = (*env)->GetArrayLength(env, row);
    jint *items = (*env)->GetIntArrayElements(env, row, NULL);
    PyObject *out = items ? PyList_New(n) : NULL;
    for (jsize i = 0; out && i < n; i++) PyList_SET_ITEM(out, i, PyLong_FromLong(items[i]));
    if (items) (*env)->ReleaseIntArrayElements(env, row, items, JNI_ABORT);
    if (items && !out) throw_python_error(env);
    return out;
}

PyObject *py_dims(JNIEnv *env, jobjectArray rows) {
    if (!rows) {
        throw_lite(env, RET_PARAM_INVALID, "the dims argument is null");
        return NULL;
    }
    jsize n = (*env)->GetArrayLength(env, rows);
    PyObject *out = PyList_New(n);
    if (!out) throw_python_error(env);
    for (jsize i = 0; out && i < n; i++) {
        jintArray row = (jintArray)(*env)->GetObjectArrayElement(env, rows, i);
        PyObject *dims = row ? py_int_list(env, row) : NULL;
        if (!row) throw_lite(env, RET_PARAM_INVALID, "a row of the dims argument is null");
        if (row) (*env)->DeleteLocalRef(env, row);
        if (!dims) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, dims);
    }
    return out;
}
