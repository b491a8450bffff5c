/* The native methods of com.mindspore.lite: each takes the GIL, calls one function of bridge.py and converts
 * its result. Handles are keys of bridge.py's handle table; bridge.py checks them. Tensor data is copied once,
 * between the Java array or direct ByteBuffer and the tensor's numpy memory (buffer protocol). */
#include "embed.h"

#include <limits.h>
#include <string.h>

#define FLOAT32 43      /* MindSpore TypeIds */
#define INT32 34
#define INT64 35
#define ANY_TYPE 0

#define NATIVE(Class, method) JNICALL Java_com_mindspore_lite_##Class##_##method

/* (handle) -> nothing */
#define HANDLE_VOID(Class, method, function)                                                   \
    JNIEXPORT void NATIVE(Class, method)(JNIEnv *env, jclass cls, jlong handle) {               \
        (void)cls;                                                                              \
        if (!embed_enter(env)) return;                                                          \
        as_void(embed_call(env, function, "(L)", (long long)handle));                            \
        embed_leave();                                                                          \
    }

/* (handle) -> value */
#define HANDLE_GET(Class, method, JType, convert, function)                                    \
    JNIEXPORT JType NATIVE(Class, method)(JNIEnv *env, jclass cls, jlong handle) {              \
        (void)cls;                                                                              \
        if (!embed_enter(env)) return 0;                                                        \
        JType out = (JType)convert(env, embed_call(env, function, "(L)", (long long)handle));    \
        embed_leave();                                                                          \
        return out;                                                                             \
    }

/* (handle, String) -> value */
#define HANDLE_STRING(Class, method, JType, convert, function)                                 \
    JNIEXPORT JType NATIVE(Class, method)(JNIEnv *env, jclass cls, jlong handle, jstring text) { \
        (void)cls;                                                                              \
        if (!embed_enter(env)) return 0;                                                        \
        PyObject *name = py_string(env, text);                                                  \
        JType out = name ? (JType)convert(env, embed_call(env, function, "(LN)", (long long)handle, name)) : 0; \
        embed_leave();                                                                          \
        return out;                                                                             \
    }

/* (no arguments) -> value */
#define STATIC_GET(Class, method, JType, convert, function)                                    \
    JNIEXPORT JType NATIVE(Class, method)(JNIEnv *env, jclass cls) {                            \
        (void)cls;                                                                              \
        if (!embed_enter(env)) return 0;                                                        \
        JType out = (JType)convert(env, embed_call(env, function, "()"));                       \
        embed_leave();                                                                          \
        return out;                                                                             \
    }

/* `length` bytes at `offset` of a direct ByteBuffer, or NULL with a LiteException thrown. */
static const char *direct_bytes(JNIEnv *env, jobject buffer, jint offset, jint length) {
    if (!buffer) {
        throw_lite(env, RET_PARAM_INVALID, "the ByteBuffer argument is null");
        return NULL;
    }
    const char *address = (*env)->GetDirectBufferAddress(env, buffer);
    jlong capacity = (*env)->GetDirectBufferCapacity(env, buffer);
    if (!address) {
        throw_lite(env, RET_PARAM_INVALID, "the ByteBuffer is not direct");
        return NULL;
    }
    if (offset < 0 || length < 0 || (jlong)offset + length > capacity) {
        throw_lite(env, RET_PARAM_INVALID, "the ByteBuffer range is out of bounds");
        return NULL;
    }
    return address + offset;
}

/* ---- NativeLibrary -------------------------------------------------------------------------------------------- */
JNIEXPORT void NATIVE(NativeLibrary, start)(JNIEnv *env, jclass cls, jstring python) {
    (void)cls;
    embed_init(env, python);
}

HANDLE_VOID(NativeLibrary, free, "free")
STATIC_GET(NativeLibrary, countHandles, jlong, as_long, "live_handles")
STATIC_GET(NativeLibrary, countPythonObjects, jlong, as_long, "python_objects")
STATIC_GET(NativeLibrary, countAllocatedBlocks, jlong, as_long, "allocated_blocks")
STATIC_GET(NativeLibrary, describePython, jstring, as_string, "python_info")
STATIC_GET(Version, versionString, jstring, as_string, "version")

/* ---- config.MSConfig, Model ----------------------------------------------------------------------------------- */
JNIEXPORT jlong JNICALL Java_com_mindspore_lite_config_MSConfig_createConfig(JNIEnv *env, jclass cls, jint device,
                                                                             jint threads, jint bind_mode,
                                                                             jboolean float16) {
    (void)cls;
    if (!embed_enter(env)) return 0;
    jlong out = as_long(env, embed_call(env, "create_config", "(iiiO)", device, threads, bind_mode,
                                        float16 ? Py_True : Py_False));
    embed_leave();
    return out;
}

JNIEXPORT jlong NATIVE(Model, loadModelFile)(JNIEnv *env, jclass cls, jstring path) {
    (void)cls;
    if (!embed_enter(env)) return 0;
    PyObject *name = py_string(env, path);
    jlong out = name ? as_long(env, embed_call(env, "load_model_file", "(N)", name)) : 0;
    embed_leave();
    return out;
}

/* A copy of the buffer's bytes: the Java buffer may be unmapped once the caller drops it. */
static PyObject *buffer_copy(JNIEnv *env, jobject buffer, jint offset, jint length) {
    const char *bytes = direct_bytes(env, buffer, offset, length);
    return bytes ? PyBytes_FromStringAndSize(bytes, length) : NULL;
}

JNIEXPORT jlong NATIVE(Model, loadModelBuffer)(JNIEnv *env, jclass cls, jobject buffer, jint offset, jint length) {
    (void)cls;
    if (!embed_enter(env)) return 0;
    PyObject *bytes = buffer_copy(env, buffer, offset, length);
    jlong out = bytes ? as_long(env, embed_call(env, "load_model_buffer", "(N)", bytes)) : 0;
    embed_leave();
    return out;
}

/* ---- LiteSession ---------------------------------------------------------------------------------------------- */
HANDLE_GET(LiteSession, createSession, jlong, as_long, "create_session")

JNIEXPORT jlong NATIVE(LiteSession, createSessionWithModel)(JNIEnv *env, jclass cls, jobject buffer, jint offset,
                                                            jint length, jlong config) {
    (void)cls;
    if (!embed_enter(env)) return 0;
    PyObject *bytes = buffer_copy(env, buffer, offset, length);
    jlong out = bytes ? as_long(env, embed_call(env, "create_session_with_model", "(NL)", bytes, (long long)config))
                      : 0;
    embed_leave();
    return out;
}

JNIEXPORT void NATIVE(LiteSession, compileGraph)(JNIEnv *env, jclass cls, jlong session, jlong model) {
    (void)cls;
    if (!embed_enter(env)) return;
    as_void(embed_call(env, "compile_graph", "(LL)", (long long)session, (long long)model));
    embed_leave();
}

HANDLE_VOID(LiteSession, runGraph, "run_graph")

JNIEXPORT void NATIVE(LiteSession, bindThread)(JNIEnv *env, jclass cls, jlong session, jboolean bind) {
    (void)cls;
    if (!embed_enter(env)) return;
    as_void(embed_call(env, "bind_thread", "(LO)", (long long)session, bind ? Py_True : Py_False));
    embed_leave();
}

HANDLE_GET(LiteSession, getInputs, jlongArray, as_long_array, "inputs")
HANDLE_STRING(LiteSession, getInputsByTensorName, jlong, as_long, "input_by_name")
HANDLE_GET(LiteSession, getOutputs, jlongArray, as_long_array, "outputs")
HANDLE_GET(LiteSession, getOutputTensorNames, jobjectArray, as_string_array, "output_names")
HANDLE_STRING(LiteSession, getOutputByTensorName, jlong, as_long, "output_by_name")
HANDLE_STRING(LiteSession, getOutputsByNodeName, jlongArray, as_long_array, "outputs_by_node_name")

JNIEXPORT void NATIVE(LiteSession, resize)(JNIEnv *env, jclass cls, jlong session, jlongArray tensors,
                                           jobjectArray dims) {
    (void)cls;
    if (!embed_enter(env)) return;
    PyObject *handles = py_long_list(env, tensors);
    PyObject *shapes = handles ? py_dims(env, dims) : NULL;
    if (shapes) as_void(embed_call(env, "resize", "(LNN)", (long long)session, handles, shapes));
    else Py_XDECREF(handles);
    embed_leave();
}

/* ---- TrainSession --------------------------------------------------------------------------------------------- */
JNIEXPORT jlong NATIVE(TrainSession, createTrainSession)(JNIEnv *env, jclass cls, jstring path, jlong config,
                                                         jboolean train_mode) {
    (void)cls;
    if (!embed_enter(env)) return 0;
    PyObject *name = py_string(env, path);
    jlong out = name ? as_long(env, embed_call(env, "create_train_session", "(NLO)", name, (long long)config,
                                               train_mode ? Py_True : Py_False))
                     : 0;
    embed_leave();
    return out;
}

HANDLE_VOID(TrainSession, train, "set_train")
HANDLE_VOID(TrainSession, eval, "set_eval")
HANDLE_GET(TrainSession, isTrain, jboolean, as_bool, "is_train")
HANDLE_GET(TrainSession, isEval, jboolean, as_bool, "is_eval")
HANDLE_GET(TrainSession, getPredictions, jlongArray, as_long_array, "predictions")
HANDLE_GET(TrainSession, getFeatureMaps, jlongArray, as_long_array, "feature_maps")

JNIEXPORT void NATIVE(TrainSession, setLearningRate)(JNIEnv *env, jclass cls, jlong session, jfloat rate) {
    (void)cls;
    if (!embed_enter(env)) return;
    as_void(embed_call(env, "set_learning_rate", "(Ld)", (long long)session, (double)rate));
    embed_leave();
}

JNIEXPORT void NATIVE(TrainSession, setupVirtualBatch)(JNIEnv *env, jclass cls, jlong session, jint multiplier,
                                                       jfloat rate, jfloat momentum) {
    (void)cls;
    if (!embed_enter(env)) return;
    as_void(embed_call(env, "setup_virtual_batch", "(Lidd)", (long long)session, multiplier, (double)rate,
                       (double)momentum));
    embed_leave();
}

JNIEXPORT void NATIVE(TrainSession, updateFeatureMaps)(JNIEnv *env, jclass cls, jlong session, jlongArray tensors) {
    (void)cls;
    if (!embed_enter(env)) return;
    PyObject *handles = py_long_list(env, tensors);
    if (handles) as_void(embed_call(env, "update_feature_maps", "(LN)", (long long)session, handles));
    embed_leave();
}

JNIEXPORT void NATIVE(TrainSession, saveToFile)(JNIEnv *env, jclass cls, jlong session, jstring path) {
    (void)cls;
    if (!embed_enter(env)) return;
    PyObject *name = py_string(env, path);
    if (name) as_void(embed_call(env, "save_to_file", "(LN)", (long long)session, name));
    embed_leave();
}

JNIEXPORT void NATIVE(TrainSession, export)(JNIEnv *env, jclass cls, jlong session, jstring path, jint model_type,
                                            jint quantization_type) {
    (void)cls;
    if (!embed_enter(env)) return;
    PyObject *name = py_string(env, path);
    if (name) as_void(embed_call(env, "export", "(LNii)", (long long)session, name, model_type, quantization_type));
    embed_leave();
}

/* ---- MSTensor ------------------------------------------------------------------------------------------------- */
HANDLE_GET(MSTensor, getShape, jintArray, as_int_array, "shape")
HANDLE_GET(MSTensor, getDataType, jint, as_long, "data_type")
HANDLE_GET(MSTensor, size, jlong, as_long, "size")
HANDLE_GET(MSTensor, elementsNum, jint, as_long, "elements_num")
HANDLE_GET(MSTensor, tensorName, jstring, as_string, "tensor_name")
HANDLE_GET(MSTensor, itemSize, jint, as_long, "item_size")

/* The tensor's memory, checked by bridge.tensor_array against the element type and (nbytes >= 0) the size to
 * be written. Returns 0 with an exception thrown on failure; release the view after use. */
static int tensor_view(JNIEnv *env, jlong tensor, int type_id, Py_ssize_t nbytes, Py_buffer *view) {
    PyObject *array = embed_call(env, "tensor_array", "(Lin)", (long long)tensor, type_id, nbytes);
    if (!array) return 0;
    int flags = PyBUF_C_CONTIGUOUS | (nbytes >= 0 ? PyBUF_WRITABLE : 0);
    int failed = PyObject_GetBuffer(array, view, flags);
    Py_DECREF(array);          /* the view keeps its own reference */
    if (failed) {
        PyErr_Clear();
        throw_lite(env, RET_ERROR, "the tensor's memory is not one contiguous block");
        return 0;
    }
    if ((nbytes >= 0 && view->len != nbytes) || view->len / (view->itemsize ? view->itemsize : 1) > INT_MAX) {
        PyBuffer_Release(view);
        throw_lite(env, RET_ERROR, "the tensor's memory does not fit a Java array");
        return 0;
    }
    return 1;
}

/* getXData(handle) -> new Java array; setXData(handle, array, offset, length): one copy each way. */
#define TENSOR_DATA(Name, JArray, JElem, type_id)                                                          \
    JNIEXPORT JArray NATIVE(MSTensor, get##Name##Data)(JNIEnv *env, jclass cls, jlong tensor) {             \
        Py_buffer view;                                                                                     \
        JArray out = NULL;                                                                                  \
        (void)cls;                                                                                          \
        if (!embed_enter(env)) return NULL;                                                                 \
        if (tensor_view(env, tensor, type_id, -1, &view)) {                                                 \
            jsize n = (jsize)(view.len / (Py_ssize_t)sizeof(JElem));                                        \
            out = (*env)->New##Name##Array(env, n);                                                         \
            if (out) (*env)->Set##Name##ArrayRegion(env, out, 0, n, (const JElem *)view.buf);               \
            PyBuffer_Release(&view);                                                                        \
        }                                                                                                   \
        embed_leave();                                                                                      \
        return out;                                                                                         \
    }                                                                                                       \
    JNIEXPORT void NATIVE(MSTensor, set##Name##Data)(JNIEnv *env, jclass cls, jlong tensor, JArray data,    \
                                                     jint offset, jint length) {                            \
        Py_buffer view;                                                                                     \
        (void)cls;                                                                                          \
        if (!embed_enter(env)) return;                                                                      \
        if (tensor_view(env, tensor, type_id, (Py_ssize_t)length * (Py_ssize_t)sizeof(JElem), &view)) {     \
            (*env)->Get##Name##ArrayRegion(env, data, offset, length, (JElem *)view.buf);                   \
            PyBuffer_Release(&view);                                                                        \
        }                                                                                                   \
        embed_leave();                                                                                      \
    }

TENSOR_DATA(Byte, jbyteArray, jbyte, ANY_TYPE)
TENSOR_DATA(Float, jfloatArray, jfloat, FLOAT32)
TENSOR_DATA(Int, jintArray, jint, INT32)
TENSOR_DATA(Long, jlongArray, jlong, INT64)

/* setData(ByteBuffer): a direct buffer is copied straight into the tensor, no Java copy in between. */
JNIEXPORT void NATIVE(MSTensor, setBufferData)(JNIEnv *env, jclass cls, jlong tensor, jobject buffer, jint offset,
                                               jint length) {
    Py_buffer view;
    (void)cls;
    const char *bytes = direct_bytes(env, buffer, offset, length);
    if (!bytes || !embed_enter(env)) return;
    if (tensor_view(env, tensor, ANY_TYPE, length, &view)) {
        memcpy(view.buf, bytes, (size_t)length);
        PyBuffer_Release(&view);
    }
    embed_leave();
}
