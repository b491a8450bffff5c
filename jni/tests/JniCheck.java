import com.mindspore.lite.DataType;
import com.mindspore.lite.LiteException;
import com.mindspore.lite.LiteSession;
import com.mindspore.lite.MSTensor;
import com.mindspore.lite.Model;
import com.mindspore.lite.NativeLibrary;
import com.mindspore.lite.TrainSession;
import com.mindspore.lite.config.CpuBindMode;
import com.mindspore.lite.config.DeviceType;
import com.mindspore.lite.config.MSConfig;

import java.io.File;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

/**
 * The Java half of tests/jni/test_examples.py: runs models and misuse cases through the public API and writes what it
 * sees (raw output bytes, counters, status codes) for the Python side to check.
 *
 *   run DIR           every DIR/NAME.ms with inputs DIR/NAME.in0.bin ...: outputs to DIR/NAME.VARIANT.outK.bin
 *                     for VARIANT "arrays" (loadModel(path), typed arrays) and "buffers" (createSession(mapped
 *                     file), direct ByteBuffers)
 *   threads MODEL A B N two threads, a session each, N runs on inputs A and B; then four threads on one session
 *   leak MODEL N      live handles and Python objects around N runs, and the Cleaner reclaiming unfreed tensors
 *   misuse MODEL CORRUPT   one line "case status" per misuse
 */
public final class JniCheck {
    private JniCheck() {
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "run":
                run(Paths.get(args[1]));
                break;
            case "threads":
                threads(args[1], read(Paths.get(args[2])), read(Paths.get(args[3])), Integer.parseInt(args[4]));
                break;
            case "leak":
                leak(args[1], Integer.parseInt(args[2]));
                break;
            case "misuse":
                misuse(args[1], args[2]);
                break;
            case "info":
                System.out.println(NativeLibrary.pythonInfo());
                break;
            default:
                throw new IllegalArgumentException(args[0]);
        }
    }

    static MSConfig config() {
        MSConfig config = new MSConfig();
        config.init(DeviceType.DT_CPU, 2, CpuBindMode.MID_CPU);
        return config;
    }

    static byte[] read(Path path) throws IOException {
        return Files.readAllBytes(path);
    }

    static LiteSession open(String path, MSConfig config) {
        Model model = new Model();
        model.loadModel(path);
        LiteSession session = LiteSession.createSession(config);
        session.compileGraph(model);
        model.free();
        return session;
    }

    // ---- run ---------------------------------------------------------------------------------------------------
    static void run(Path dir) throws IOException {
        MSConfig config = config();
        File[] models = dir.toFile().listFiles((d, name) -> name.endsWith(".ms"));
        Arrays.sort(models);
        for (File file : models) {
            String name = file.getName().replace(".ms", "");
            try (LiteSession session = open(file.getPath(), config)) {
                List<MSTensor> inputs = session.getInputs();
                for (int k = 0; k < inputs.size(); k++) {
                    setTyped(inputs.get(k), read(dir.resolve(name + ".in" + k + ".bin")));
                }
                session.runGraph();
                writeOutputs(session, dir, name + ".arrays");
            }
            try (RandomAccessFile raf = new RandomAccessFile(file, "r");
                 LiteSession session = LiteSession.createSession(
                     raf.getChannel().map(FileChannel.MapMode.READ_ONLY, 0, raf.length()), config)) {
                List<MSTensor> inputs = session.getInputs();
                for (int k = 0; k < inputs.size(); k++) {
                    byte[] raw = read(dir.resolve(name + ".in" + k + ".bin"));
                    ByteBuffer buffer = ByteBuffer.allocateDirect(raw.length).order(ByteOrder.nativeOrder());
                    buffer.put(raw).flip();
                    inputs.get(k).setData(buffer);
                }
                session.runGraph();
                writeOutputs(session, dir, name + ".buffers");
            }
        }
        config.free();
    }

    /** Raw bytes through the typed setter of the tensor's dtype. */
    static void setTyped(MSTensor tensor, byte[] raw) {
        ByteBuffer bytes = ByteBuffer.wrap(raw).order(ByteOrder.nativeOrder());
        switch (tensor.getDataType()) {
            case DataType.kNumberTypeFloat32: {
                float[] values = new float[raw.length / 4];
                bytes.asFloatBuffer().get(values);
                tensor.setData(values);
                break;
            }
            case DataType.kNumberTypeInt32: {
                int[] values = new int[raw.length / 4];
                bytes.asIntBuffer().get(values);
                tensor.setData(values);
                break;
            }
            case DataType.kNumberTypeInt64: {
                long[] values = new long[raw.length / 8];
                bytes.asLongBuffer().get(values);
                tensor.setData(values);
                break;
            }
            default:
                tensor.setData(raw);
        }
    }

    /** Each output through its typed getter (float32) or as bytes, written as raw native-order bytes. */
    static void writeOutputs(LiteSession session, Path dir, String prefix) throws IOException {
        int k = 0;
        for (Map.Entry<String, MSTensor> entry : session.getOutputMapByTensor().entrySet()) {
            MSTensor tensor = entry.getValue();
            byte[] raw;
            if (tensor.getDataType() == DataType.kNumberTypeFloat32) {
                float[] values = tensor.getFloatData();
                ByteBuffer buffer = ByteBuffer.allocate(values.length * 4).order(ByteOrder.nativeOrder());
                buffer.asFloatBuffer().put(values);
                raw = buffer.array();
            } else {
                raw = tensor.getByteData();
            }
            Files.write(dir.resolve(prefix + ".out" + k++ + ".bin"), raw);
            Files.write(dir.resolve(prefix + ".name" + (k - 1) + ".txt"), entry.getKey().getBytes("UTF-8"));
        }
    }

    // ---- threads -----------------------------------------------------------------------------------------------
    static float[] floats(byte[] raw) {
        float[] values = new float[raw.length / 4];
        ByteBuffer.wrap(raw).order(ByteOrder.nativeOrder()).asFloatBuffer().get(values);
        return values;
    }

    static float[] infer(LiteSession session, float[] input) {
        synchronized (session) {
            session.getInputs().get(0).setData(input);
            session.runGraph();
            return session.getOutputMapByTensor().values().iterator().next().getFloatData();
        }
    }

    static void threads(String modelPath, byte[] a, byte[] b, int runs) throws Exception {
        MSConfig config = config();
        float[][] inputs = {floats(a), floats(b)};
        float[][] first = new float[2][];
        AtomicInteger changed = new AtomicInteger();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < 2; t++) {
            final int id = t;
            workers.add(new Thread(() -> {
                try (LiteSession session = open(modelPath, config)) {
                    for (int i = 0; i < runs; i++) {
                        float[] out = infer(session, inputs[id]);
                        if (i == 0) {
                            first[id] = out;
                        } else if (!Arrays.equals(out, first[id])) {
                            changed.incrementAndGet();
                        }
                    }
                }
            }));
        }
        join(workers);
        System.out.println("own-session changed " + changed.get());
        System.out.println("own-session outputs " + Arrays.toString(first[0]) + " " + Arrays.toString(first[1]));

        LiteSession shared = open(modelPath, config);
        AtomicInteger wrong = new AtomicInteger();
        AtomicInteger failures = new AtomicInteger();
        workers.clear();
        for (int t = 0; t < 4; t++) {
            final int id = t % 2;
            workers.add(new Thread(() -> {
                for (int i = 0; i < runs; i++) {
                    if (!Arrays.equals(infer(shared, inputs[id]), first[id])) {
                        wrong.incrementAndGet();
                    }
                    try {
                        shared.runGraph();           // unsynchronised by the caller: serialised by the session
                        shared.getOutputTensorNames();
                    } catch (LiteException e) {
                        failures.incrementAndGet();
                    }
                }
            }));
        }
        join(workers);
        shared.free();
        System.out.println("shared-session wrong " + wrong.get() + " failures " + failures.get());
    }

    static void join(List<Thread> workers) throws InterruptedException {
        for (Thread worker : workers) {
            worker.start();
        }
        for (Thread worker : workers) {
            worker.join();
        }
    }

    // ---- leak --------------------------------------------------------------------------------------------------
    static void leak(String modelPath, int runs) throws InterruptedException {
        MSConfig config = config();
        LiteSession session = open(modelPath, config);
        MSTensor input = session.getInputs().get(0);
        MSTensor output = session.getOutputMapByTensor().values().iterator().next();
        float[] x = new float[input.elementsNum()];
        Arrays.fill(x, 0.5f);
        for (int i = 0; i < 200; i++) {
            input.setData(x);
            session.runGraph();
            output.getFloatData();
        }
        long handles = NativeLibrary.liveHandles();
        long objects = NativeLibrary.pythonObjects();
        long blocks = NativeLibrary.allocatedBlocks();
        for (int i = 0; i < runs; i++) {
            input.setData(x);
            session.runGraph();
            output.getFloatData();
        }
        System.out.println("runs " + runs);
        System.out.println("handles " + handles + " " + NativeLibrary.liveHandles());
        System.out.println("objects " + objects + " " + NativeLibrary.pythonObjects());
        System.out.println("blocks " + blocks + " " + NativeLibrary.allocatedBlocks());

        for (int i = 0; i < 1000; i++) {
            for (MSTensor tensor : session.getInputs()) {
                tensor.free();
            }
        }
        System.out.println("freed " + handles + " " + NativeLibrary.liveHandles());
        for (int i = 0; i < 1000; i++) {
            session.getOutputMapByTensor();             // never freed: left to the Cleaner
        }
        long peak = NativeLibrary.liveHandles();
        long deadline = System.currentTimeMillis() + 20000;
        while (NativeLibrary.liveHandles() > handles && System.currentTimeMillis() < deadline) {
            System.gc();
            Thread.sleep(50);
        }
        System.out.println("cleaned " + peak + " " + NativeLibrary.liveHandles());
        session.free();
        config.free();
    }

    // ---- misuse ------------------------------------------------------------------------------------------------
    static void report(String name, Runnable action) {
        try {
            action.run();
            System.out.println(name + " ok");
        } catch (LiteException e) {
            System.out.println(name + " " + e.getStatus() + " " + e.getMessage().replace('\n', ' '));
        }
    }

    static <T> Runnable call(Supplier<T> action) {
        return action::get;
    }

    static void misuse(String modelPath, String corruptPath) throws IOException {
        MSConfig config = config();
        LiteSession session = open(modelPath, config);
        MSTensor input = session.getInputs().get(0);
        int n = input.elementsNum();
        report("short-float-data", () -> input.setData(new float[n - 1]));
        report("long-byte-data", () -> input.setData(new byte[4 * n + 1]));
        report("int-data-on-float", () -> input.setData(new int[n]));
        report("long-data-on-float", () -> input.setData(new long[n]));
        report("get-int-of-float", call(input::getIntData));
        report("swapped-byte-order", () -> input.setData(ByteBuffer.allocateDirect(4 * n).order(
            ByteOrder.nativeOrder() == ByteOrder.BIG_ENDIAN ? ByteOrder.LITTLE_ENDIAN : ByteOrder.BIG_ENDIAN)));
        report("heap-buffer", () -> input.setData(ByteBuffer.allocate(4 * n).order(ByteOrder.nativeOrder())));
        report("null-float-data", () -> input.setData((float[]) null));
        report("null-buffer", () -> input.setData((ByteBuffer) null));
        report("null-model", call(() -> session.compileGraph(null)));
        report("null-name", call(() -> session.getInputsByTensorName(null)));
        report("unknown-name", () -> {
            if (session.getInputsByTensorName("no such tensor") != null) {
                throw new AssertionError("found a tensor that does not exist");
            }
        });
        report("null-config", call(() -> LiteSession.createSession((MSConfig) null)));
        report("null-path", call(() -> new Model().loadModel((String) null)));
        report("null-resize", call(() -> session.resize(null, new int[][] {{1}})));
        report("resize-rank", call(() -> session.resize(session.getInputs(), new int[][] {{1, 2}})));
        report("resize-count", call(() -> session.resize(session.getInputs(), new int[][] {})));
        report("bad-threads", call(() -> new MSConfig().init(DeviceType.DT_CPU, 0, CpuBindMode.MID_CPU)));
        report("bad-device", call(() -> new MSConfig().init(7, 2, CpuBindMode.MID_CPU)));
        report("gpu-falls-back", call(() -> {
            MSConfig gpu = new MSConfig();
            gpu.init(DeviceType.DT_GPU, 2, CpuBindMode.MID_CPU, true);
            LiteSession s = open(modelPath, gpu);
            s.runGraph();
            s.free();
            gpu.free();
            return true;
        }));
        report("corrupt-file", call(() -> new Model().loadModel(corruptPath)));
        report("missing-file", call(() -> new Model().loadModel(corruptPath + ".missing")));
        report("corrupt-buffer", call(() -> {
            try (RandomAccessFile raf = new RandomAccessFile(corruptPath, "r")) {
                MappedByteBuffer mapped = raf.getChannel().map(FileChannel.MapMode.READ_ONLY, 0, raf.length());
                return LiteSession.createSession(mapped, config);
            } catch (IOException e) {
                throw new AssertionError(e);
            }
        }));
        report("train-inference-model", call(() -> TrainSession.createSession(modelPath, config, true)));
        report("unloaded-model", call(() -> session.compileGraph(new Model())));
        report("uninitialised-config", call(() -> LiteSession.createSession(new MSConfig())));

        Model model = new Model();
        model.loadModel(modelPath);
        model.free();
        report("freed-model", call(() -> session.compileGraph(model)));
        report("double-free-model", model::free);
        MSTensor other = session.getInputs().get(0);
        other.free();
        report("freed-tensor", call(other::getShape));
        report("freed-tensor-set", () -> other.setData(new float[n]));
        report("double-free-tensor", other::free);
        report("close-after-free", other::close);
        MSTensor output = session.getOutputMapByTensor().values().iterator().next();
        session.runGraph();
        float[] before = output.getFloatData();
        session.free();
        report("freed-session-run", call(session::runGraph));
        report("freed-session-inputs", call(session::getInputs));
        report("double-free-session", session::free);
        report("tensor-after-session-free", () -> {
            if (!Arrays.equals(before, output.getFloatData())) {
                throw new AssertionError("output changed");
            }
        });
        report("freed-config", call(() -> {
            MSConfig c = config();
            c.free();
            return LiteSession.createSession(c);
        }));
        System.out.println("live " + NativeLibrary.liveHandles());
    }
}
