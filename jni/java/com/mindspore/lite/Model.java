package com.mindspore.lite;

import java.nio.MappedByteBuffer;

/** A verified, imported .ms model. Compile it into a session with {@link LiteSession#compileGraph(Model)}. */
public class Model extends NativeObject {
    public Model() {
    }

    /** Map the file read-only and import it (weights stay views into the mapping); RET_GRAPH_FILE_ERR if bad. */
    public synchronized boolean loadModel(String modelPath) {
        attach(loadModelFile(required(modelPath, "loadModel: modelPath")));
        return true;
    }

    /** Import the buffer's remaining bytes (copied: the model outlives the caller's mapping). */
    public synchronized boolean loadModel(MappedByteBuffer buffer) {
        required(buffer, "loadModel: buffer");
        attach(loadModelBuffer(buffer, buffer.position(), buffer.remaining()));
        return true;
    }

    private static native long loadModelFile(String path);

    private static native long loadModelBuffer(MappedByteBuffer buffer, int offset, int length);
}
