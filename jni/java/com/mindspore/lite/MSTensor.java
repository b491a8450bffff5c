package com.mindspore.lite;

import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.function.LongFunction;

/**
 * A graph tensor of a session. Data crosses in one copy between a Java array (or a direct ByteBuffer) and the
 * session's memory. Typed access must match the tensor's data type ({@code float[]} for kNumberTypeFloat32,
 * {@code int[]} for kNumberTypeInt32, {@code long[]} for kNumberTypeInt64; bytes for any type) and setData must
 * fill the tensor exactly; otherwise LiteException(RET_INPUT_TENSOR_ERROR). Calls are serialised on the session
 * the tensor came from. A tensor keeps its data readable after its session is freed.
 */
public class MSTensor extends NativeObject {
    private final Object owner;

    MSTensor(long handle, Object owner) {
        this.owner = owner;
        attach(handle);
    }

    @Override
    protected Object lock() {
        return owner;
    }

    /** `call` with the live handle, serialised on the session, this tensor kept reachable until it returns. */
    private <T> T locked(LongFunction<T> call) {
        synchronized (owner) {
            try {
                return call.apply(handle());
            } finally {
                Reference.reachabilityFence(this);
            }
        }
    }

    public int[] getShape() {
        return locked(tensor -> getShape(tensor));
    }

    /** The MindSpore TypeId, see {@link DataType}. */
    public int getDataType() {
        return locked(tensor -> getDataType(tensor));
    }

    /** A copy of the raw bytes, in native byte order. */
    public byte[] getByteData() {
        return locked(tensor -> getByteData(tensor));
    }

    public float[] getFloatData() {
        return locked(tensor -> getFloatData(tensor));
    }

    public int[] getIntData() {
        return locked(tensor -> getIntData(tensor));
    }

    public long[] getLongData() {
        return locked(tensor -> getLongData(tensor));
    }

    /** Raw bytes in native byte order, exactly {@link #size()} of them. */
    public void setData(byte[] data) {
        required(data, "setData: data");
        locked(tensor -> {
            setByteData(tensor, data, 0, data.length);
            return null;
        });
    }

    public void setData(float[] data) {
        required(data, "setData: data");
        locked(tensor -> {
            setFloatData(tensor, data, 0, data.length);
            return null;
        });
    }

    public void setData(int[] data) {
        required(data, "setData: data");
        locked(tensor -> {
            setIntData(tensor, data, 0, data.length);
            return null;
        });
    }

    public void setData(long[] data) {
        required(data, "setData: data");
        locked(tensor -> {
            setLongData(tensor, data, 0, data.length);
            return null;
        });
    }

    /**
     * The buffer's remaining bytes (its position is left unchanged). A direct buffer is copied straight into the
     * tensor; elements wider than a byte must be in {@link ByteOrder#nativeOrder()}, else RET_PARAM_INVALID.
     */
    public void setData(ByteBuffer data) {
        required(data, "setData: data");
        locked(handle -> {
            if (data.order() != ByteOrder.nativeOrder() && itemSize(handle) > 1) {
                throw new LiteException(LiteException.RET_PARAM_INVALID, "setData: tensor '" + tensorName(handle)
                                        + "' needs a ByteBuffer in native byte order (ByteOrder.nativeOrder())");
            }
            if (data.isDirect()) {
                setBufferData(handle, data, data.position(), data.remaining());
            } else if (data.hasArray()) {
                setByteData(handle, data.array(), data.arrayOffset() + data.position(), data.remaining());
            } else {
                byte[] copy = new byte[data.remaining()];
                data.duplicate().get(copy);
                setByteData(handle, copy, 0, copy.length);
            }
            return null;
        });
    }

    /** Bytes of data. */
    public long size() {
        return locked(tensor -> size(tensor));
    }

    public int elementsNum() {
        return locked(tensor -> elementsNum(tensor));
    }

    public String tensorName() {
        return locked(tensor -> tensorName(tensor));
    }

    private static native int[] getShape(long tensor);

    private static native int getDataType(long tensor);

    private static native byte[] getByteData(long tensor);

    private static native float[] getFloatData(long tensor);

    private static native int[] getIntData(long tensor);

    private static native long[] getLongData(long tensor);

    private static native void setByteData(long tensor, byte[] data, int offset, int length);

    private static native void setFloatData(long tensor, float[] data, int offset, int length);

    private static native void setIntData(long tensor, int[] data, int offset, int length);

    private static native void setLongData(long tensor, long[] data, int offset, int length);

    private static native void setBufferData(long tensor, ByteBuffer data, int offset, int length);

    private static native long size(long tensor);

    private static native int elementsNum(long tensor);

    private static native String tensorName(long tensor);

    private static native int itemSize(long tensor);
}
