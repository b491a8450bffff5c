package com.mindspore.lite;

/** The runtime version. */
public final class Version {
    private Version() {
    }

    /** The version string of the runtime behind this API, e.g. "MindSpore Lite (Python) 0.1.0". */
    public static String version() {
        NativeLibrary.load();
        return versionString();
    }

    private static native String versionString();
}
