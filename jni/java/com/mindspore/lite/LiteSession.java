package com.mindspore.lite;

import com.mindspore.lite.config.MSConfig;

import java.lang.ref.Reference;
import java.nio.MappedByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Runs one compiled model. Every call on a session, and on the tensors it hands out, is serialised on the
 * session object: sessions may be shared between threads, and a caller who needs setData, runGraph and the
 * reads of the outputs to happen as one unit holds {@code synchronized (session) { ... }} around them.
 * Methods that return {@code boolean} in MindSpore Lite return {@code true}, or throw {@link LiteException}.
 */
public class LiteSession extends NativeObject {
    public LiteSession() {
    }

    LiteSession(long handle) {
        super(handle);
    }

    /** A session without a model: call {@link #compileGraph(Model)} next. */
    public static LiteSession createSession(MSConfig config) {
        required(config, "createSession: config");
        try {
            return new LiteSession(createSession(config.handle()));
        } finally {
            Reference.reachabilityFence(config);
        }
    }

    /** Import the buffer's remaining bytes (copied) and compile them in one call. */
    public static LiteSession createSession(MappedByteBuffer buffer, MSConfig config) {
        required(buffer, "createSession: buffer");
        required(config, "createSession: config");
        try {
            return new LiteSession(createSessionWithModel(buffer, buffer.position(), buffer.remaining(),
                                                          config.handle()));
        } finally {
            Reference.reachabilityFence(config);
        }
    }

    /** MindSpore Lite 1.1's two-step form of {@link #createSession(MSConfig)}. */
    public synchronized boolean init(MSConfig config) {
        required(config, "init: config");
        try {
            attach(createSession(config.handle()));
        } finally {
            Reference.reachabilityFence(config);
        }
        return true;
    }

    /** Accepted for compatibility: Python threads are not pinned to cores. */
    public synchronized void bindThread(boolean ifBind) {
        bindThread(handle(), ifBind);
    }

    public synchronized boolean compileGraph(Model model) {
        required(model, "compileGraph: model");
        try {
            compileGraph(handle(), model.handle());
        } finally {
            Reference.reachabilityFence(model);
        }
        return true;
    }

    public synchronized boolean runGraph() {
        runGraph(handle());
        return true;
    }

    public synchronized List<MSTensor> getInputs() {
        return tensors(getInputs(handle()));
    }

    /** The input of that name, or null. */
    public synchronized MSTensor getInputsByTensorName(String tensorName) {
        return tensor(getInputsByTensorName(handle(), required(tensorName, "getInputsByTensorName: tensorName")));
    }

    /** Deprecated in MindSpore Lite 1.1: use {@link #getOutputByTensorName(String)}. */
    @Deprecated
    public synchronized List<MSTensor> getOutputsByNodeName(String nodeName) {
        return tensors(getOutputsByNodeName(handle(), required(nodeName, "getOutputsByNodeName: nodeName")));
    }

    /** Output tensor name to tensor, in the model's output order. */
    public synchronized Map<String, MSTensor> getOutputMapByTensor() {
        Map<String, MSTensor> outputs = new LinkedHashMap<>();
        for (MSTensor tensor : tensors(getOutputs(handle()))) {
            outputs.put(tensor.tensorName(), tensor);
        }
        return outputs;
    }

    public synchronized List<String> getOutputTensorNames() {
        List<String> names = new ArrayList<>();
        Collections.addAll(names, getOutputTensorNames(handle()));
        return names;
    }

    /** The output of that name, or null. */
    public synchronized MSTensor getOutputByTensorName(String tensorName) {
        return tensor(getOutputByTensorName(handle(), required(tensorName, "getOutputByTensorName: tensorName")));
    }

    /** New shapes for graph inputs (same rank); recompiles. Input data is reset. */
    public synchronized boolean resize(List<MSTensor> inputs, int[][] dims) {
        required(inputs, "resize: inputs");
        required(dims, "resize: dims");
        long[] handles = new long[inputs.size()];
        for (int i = 0; i < handles.length; i++) {
            handles[i] = required(inputs.get(i), "resize: inputs[" + i + "]").handle();
        }
        try {
            resize(handle(), handles, dims);
        } finally {
            Reference.reachabilityFence(inputs);
        }
        return true;
    }

    /** Java tensors over the given handles, serialised on this session. */
    final List<MSTensor> tensors(long[] handles) {
        List<MSTensor> list = new ArrayList<>(handles.length);
        for (long handle : handles) {
            list.add(new MSTensor(handle, this));
        }
        return list;
    }

    private MSTensor tensor(long handle) {
        return handle == 0 ? null : new MSTensor(handle, this);
    }

    private static native long createSession(long config);

    private static native long createSessionWithModel(MappedByteBuffer buffer, int offset, int length, long config);

    private static native void bindThread(long session, boolean ifBind);

    private static native void compileGraph(long session, long model);

    private static native void runGraph(long session);

    private static native long[] getInputs(long session);

    private static native long getInputsByTensorName(long session, String tensorName);

    private static native long[] getOutputsByNodeName(long session, String nodeName);

    private static native long[] getOutputs(long session);

    private static native String[] getOutputTensorNames(long session);

    private static native long getOutputByTensorName(long session, String tensorName);

    private static native void resize(long session, long[] tensors, int[][] dims);
}
