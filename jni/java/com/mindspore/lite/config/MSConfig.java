package com.mindspore.lite.config;

import com.mindspore.lite.NativeObject;

/** Session settings: device, threads (bounding the BLAS threads of a run), CPU binding, float16. */
public class MSConfig extends NativeObject {
    public MSConfig() {
    }

    /** RET_PARAM_INVALID for an unknown device type or bind mode, or threadNum below 1. */
    public synchronized boolean init(int deviceType, int threadNum, int cpuBindMode, boolean enableFloat16) {
        attach(createConfig(deviceType, threadNum, cpuBindMode, enableFloat16));
        return true;
    }

    public boolean init(int deviceType, int threadNum, int cpuBindMode) {
        return init(deviceType, threadNum, cpuBindMode, false);
    }

    public boolean init(int deviceType, int threadNum) {
        return init(deviceType, threadNum, CpuBindMode.MID_CPU, false);
    }

    /** The native handle, for the sessions of this package family. */
    public long getMSConfigPtr() {
        return handle();
    }

    private static native long createConfig(int deviceType, int threadNum, int cpuBindMode, boolean enableFloat16);
}
