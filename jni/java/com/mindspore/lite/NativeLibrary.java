package com.mindspore.lite;

import java.io.File;
import java.security.CodeSource;

/**
 * Loads libmindspore-lite-jni.so and starts the embedded Python runtime, once per process. Every class of this
 * API calls {@link #load()} before its first native call, so callers never need to.
 *
 * <p>The library is taken from the system property {@value #LIBRARY_PROPERTY} (a file path) if set, else from
 * {@code java.library.path}, else from beside mindspore-lite-java.jar. The Python interpreter to embed is the
 * system property {@value #PYTHON_PROPERTY}, else the environment variable {@value #PYTHON_ENV}, else the
 * interpreter the library was built with; it must be that Python or a venv of it, with the package installed.
 *
 * <p>The counters are diagnostics: live handles (one per Java object not yet freed or cleaned), and the
 * embedded interpreter's garbage-collected objects and allocated memory blocks after a full collection.
 */
public final class NativeLibrary {
    public static final String LIBRARY = "mindspore-lite-jni";
    public static final String LIBRARY_PROPERTY = "mindspore.lite.library";
    public static final String PYTHON_PROPERTY = "mindspore.lite.python";
    public static final String PYTHON_ENV = "MSLITE_PYTHON";

    private static volatile boolean started;

    private NativeLibrary() {
    }

    /** Load the library and start Python (idempotent); throws LiteException when Python cannot start. */
    public static void load() {
        if (started) {
            return;
        }
        synchronized (NativeLibrary.class) {
            if (started) {
                return;
            }
            loadLibrary();
            String python = System.getProperty(PYTHON_PROPERTY);
            if (python == null || python.isEmpty()) {
                python = System.getenv(PYTHON_ENV);
            }
            start(python);
            started = true;
        }
    }

    /** Handles held by Java objects that are neither freed nor cleaned yet. */
    public static long liveHandles() {
        load();
        return countHandles();
    }

    /** Objects tracked by the embedded interpreter's garbage collector, after a full collection. */
    public static long pythonObjects() {
        load();
        return countPythonObjects();
    }

    /** Memory blocks the embedded interpreter has allocated, after a full collection. */
    public static long allocatedBlocks() {
        load();
        return countAllocatedBlocks();
    }

    /** The embedded interpreter: version, executable, prefix and where the runtime package was imported from. */
    public static String pythonInfo() {
        load();
        return describePython();
    }

    private static void loadLibrary() {
        String path = System.getProperty(LIBRARY_PROPERTY);
        if (path != null && !path.isEmpty()) {
            System.load(new File(path).getAbsolutePath());
            return;
        }
        try {
            System.loadLibrary(LIBRARY);
        } catch (UnsatisfiedLinkError notOnLibraryPath) {
            File beside = besideJar();
            if (beside == null || !beside.isFile()) {
                throw notOnLibraryPath;
            }
            System.load(beside.getAbsolutePath());
        }
    }

    private static File besideJar() {
        try {
            CodeSource source = NativeLibrary.class.getProtectionDomain().getCodeSource();
            if (source == null) {
                return null;
            }
            File location = new File(source.getLocation().toURI());
            return new File(location.isDirectory() ? location : location.getParentFile(),
                            System.mapLibraryName(LIBRARY));
        } catch (Exception unknownLocation) {
            return null;
        }
    }

    private static native void start(String python);

    static native void free(long handle);

    private static native long countHandles();

    private static native long countPythonObjects();

    private static native long countAllocatedBlocks();

    private static native String describePython();
}
