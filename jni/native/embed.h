/* The embedded CPython behind the Java API: start-up, the GIL per call, Python -> Java values and errors. */
#ifndef MSLITE_JNI_EMBED_H
#define MSLITE_JNI_EMBED_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <jni.h>

/* MindSpore Lite status codes the bridge raises itself. */
#define RET_ERROR (-1)
#define RET_NULL_PTR (-2)
#define RET_PARAM_INVALID (-3)

/* Start the interpreter once per process (`python`: the interpreter executable, NULL for the build default). */
void embed_init(JNIEnv *env, jstring python);

/* Take the GIL with this OS thread's Python thread state (created on its first call, kept until the thread
 * exits). Returns 0 with a Java exception pending when the interpreter is not running. */
int embed_enter(JNIEnv *env);
void embed_leave(void);

/* Call `_mslite_jni.<function>` with arguments built by Py_BuildValue(`format`, ...) (a tuple format such as
 * "(Ls)"). On a Python exception, throws a Java LiteException and returns NULL. GIL held. */
PyObject *embed_call(JNIEnv *env, const char *function, const char *format, ...);

/* Throw com.mindspore.lite.LiteException(status, message). */
void throw_lite(JNIEnv *env, int status, const char *message);

/* Conversions of a call's result; each steals `result` (NULL passes through, with the exception pending). */
jlong as_long(JNIEnv *env, PyObject *result);
jboolean as_bool(JNIEnv *env, PyObject *result);
jstring as_string(JNIEnv *env, PyObject *result);
jlongArray as_long_array(JNIEnv *env, PyObject *result);
jintArray as_int_array(JNIEnv *env, PyObject *result);
jobjectArray as_string_array(JNIEnv *env, PyObject *result);
void as_void(PyObject *result);

/* Java -> Python: new references, or NULL with a Java exception pending. */
PyObject *py_string(JNIEnv *env, jstring text);
PyObject *py_long_list(JNIEnv *env, jlongArray values);
PyObject *py_dims(JNIEnv *env, jobjectArray rows);

#endif
