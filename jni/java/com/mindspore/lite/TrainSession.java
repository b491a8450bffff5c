package com.mindspore.lite;

import com.mindspore.lite.config.MSConfig;

import java.lang.ref.Reference;
import java.util.List;

/**
 * A session over a training model (converted with {@code converter_lite --trainModel=true}). In train mode
 * {@link #runGraph()} is one training step (forward, loss, backward, optimizer); in eval mode it is the
 * inference forward. Serialised like {@link LiteSession}.
 */
public class TrainSession extends LiteSession {
    /** Export model types (MindSpore's ModelType). */
    public static final int MT_TRAIN = 0;
    public static final int MT_INFERENCE = 1;
    /** Export quantization types (MindSpore's QuantizationType); only no quantization is supported. */
    public static final int QT_DEFAULT = 0;
    public static final int QT_NONE = 1;

    private TrainSession(long handle) {
        super(handle);
    }

    /** Load a training model file and compile it; starts in train mode when {@code trainMode}, else eval. */
    public static TrainSession createSession(String modelName, MSConfig config, boolean trainMode) {
        required(modelName, "createSession: modelName");
        required(config, "createSession: config");
        try {
            return new TrainSession(createTrainSession(modelName, config.handle(), trainMode));
        } finally {
            Reference.reachabilityFence(config);
        }
    }

    /** The MindSpore Lite 1.3 name of {@link #createSession(String, MSConfig, boolean)}. */
    public static TrainSession createTrainSession(String modelName, MSConfig config, boolean trainMode) {
        return createSession(modelName, config, trainMode);
    }

    /** Train mode; RET_NOT_SUPPORT for an inference model. */
    public synchronized boolean train() {
        train(handle());
        return true;
    }

    public synchronized boolean eval() {
        eval(handle());
        return true;
    }

    public synchronized boolean isTrain() {
        return isTrain(handle());
    }

    public synchronized boolean isEval() {
        return isEval(handle());
    }

    public synchronized boolean setLearningRate(float learningRate) {
        setLearningRate(handle(), learningRate);
        return true;
    }

    /**
     * Accumulate gradients over {@code virtualBatchMultiplier} steps and update with their mean; a positive
     * {@code learningRate} sets the learning rate, a positive {@code momentum} the BatchNorm momentum.
     */
    public synchronized boolean setupVirtualBatch(int virtualBatchMultiplier, float learningRate, float momentum) {
        setupVirtualBatch(handle(), virtualBatchMultiplier, learningRate, momentum);
        return true;
    }

    public boolean setupVirtualBatch(int virtualBatchMultiplier) {
        return setupVirtualBatch(virtualBatchMultiplier, -1.0f, -1.0f);
    }

    /** The prediction outputs of the current mode (without the loss). */
    public synchronized List<MSTensor> getPredictions() {
        return tensors(getPredictions(handle()));
    }

    /** The trainable weights, live: setData on them changes the model. */
    public synchronized List<MSTensor> getFeatureMaps() {
        return tensors(getFeatureMaps(handle()));
    }

    /** Set trainable weights from tensors of the same names (e.g. another session's getFeatureMaps()). */
    public synchronized boolean updateFeatureMaps(List<MSTensor> features) {
        required(features, "updateFeatureMaps: features");
        long[] handles = new long[features.size()];
        for (int i = 0; i < handles.length; i++) {
            handles[i] = required(features.get(i), "updateFeatureMaps: features[" + i + "]").handle();
        }
        try {
            updateFeatureMaps(handle(), handles);
        } finally {
            Reference.reachabilityFence(features);
        }
        return true;
    }

    /** A resumable training checkpoint, written atomically. */
    public synchronized boolean saveToFile(String modelFile) {
        saveToFile(handle(), required(modelFile, "saveToFile: modelFile"));
        return true;
    }

    /** MT_TRAIN: a checkpoint; MT_INFERENCE: the forward only, BatchNorm folded, for a LiteSession. */
    public synchronized boolean export(String modelFileName, int modelType, int quantizationType) {
        export(handle(), required(modelFileName, "export: modelFileName"), modelType, quantizationType);
        return true;
    }

    private static native long createTrainSession(String modelName, long config, boolean trainMode);

    private static native void train(long session);

    private static native void eval(long session);

    private static native boolean isTrain(long session);

    private static native boolean isEval(long session);

    private static native void setLearningRate(long session, float learningRate);

    private static native void setupVirtualBatch(long session, int multiplier, float learningRate, float momentum);

    private static native long[] getPredictions(long session);

    private static native long[] getFeatureMaps(long session);

    private static native void updateFeatureMaps(long session, long[] features);

    private static native void saveToFile(long session, String modelFile);

    private static native void export(long session, String modelFileName, int modelType, int quantizationType);
}
