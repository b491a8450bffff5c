package com.mindspore.lite.config;

/** Thread-to-core binding, accepted for compatibility (Python threads are not pinned). */
public final class CpuBindMode {
    public static final int NO_BIND = 0;
    public static final int HIGHER_CPU = 1;
    public static final int MID_CPU = 2;

    private CpuBindMode() {
    }
}
