package com.mindspore.lite;

import java.lang.ref.Cleaner;

/**
 * A Java object backed by one native handle. {@code free()} releases it and makes every further use (and a
 * second {@code free()}) a {@link LiteException} with {@code RET_NULL_PTR}; {@code close()} frees if not yet
 * freed, for try-with-resources; a {@link Cleaner} releases what a caller forgot. The handle is a key into the
 * native handle table, never a raw pointer, so a stale handle can only ever be refused.
 */
public abstract class NativeObject implements AutoCloseable {
    private static final Cleaner CLEANER = Cleaner.create();

    /** The cleaning action: holds the handle, never the object, so the object can become unreachable. */
    private static final class Handle implements Runnable {
        private volatile long value;

        Handle(long value) {
            this.value = value;
        }

        @Override
        public void run() {
            long handle = value;
            value = 0;
            if (handle != 0) {
                NativeLibrary.free(handle);
            }
        }
    }

    private volatile Handle handle;
    private Cleaner.Cleanable cleanable;

    protected NativeObject() {
        NativeLibrary.load();
    }

    protected NativeObject(long handle) {
        this();
        attach(handle);
    }

    /** Hold `value` from now on, releasing the handle held before. */
    protected final void attach(long value) {
        synchronized (lock()) {
            if (cleanable != null) {
                cleanable.clean();
            }
            handle = new Handle(value);
            cleanable = CLEANER.register(this, handle);
        }
    }

    /** The live handle; LiteException(RET_NULL_PTR) if there is none (never initialised, or freed). */
    protected final long handle() {
        Handle current = handle;
        long value = current == null ? 0 : current.value;
        if (value == 0) {
            throw new LiteException(LiteException.RET_NULL_PTR,
                                    getClass().getSimpleName() + " is not initialised or has been freed");
        }
        return value;
    }

    /** The monitor this object's calls are serialised on. */
    protected Object lock() {
        return this;
    }

    /** Release the native object; a second free() or any later use throws LiteException(RET_NULL_PTR). */
    public void free() {
        synchronized (lock()) {
            handle();
            cleanable.clean();
        }
    }

    /** free() unless already freed. */
    @Override
    public void close() {
        synchronized (lock()) {
            Handle current = handle;
            if (current != null && current.value != 0) {
                cleanable.clean();
            }
        }
    }

    /** `value`, or LiteException(RET_PARAM_INVALID) naming the argument when it is null. */
    protected static <T> T required(T value, String what) {
        if (value == null) {
            throw new LiteException(LiteException.RET_PARAM_INVALID, what + " is null");
        }
        return value;
    }
}
