package com.mindspore.lite.config;

/** The preferred device of a session; this runtime runs on the CPU and falls back to it from GPU and NPU. */
public final class DeviceType {
    public static final int DT_CPU = 0;
    public static final int DT_GPU = 1;
    public static final int DT_NPU = 2;

    private DeviceType() {
    }
}
