import com.mindspore.lite.LiteSession;
import com.mindspore.lite.MSTensor;
import com.mindspore.lite.Model;
import com.mindspore.lite.TrainSession;
import com.mindspore.lite.config.CpuBindMode;
import com.mindspore.lite.config.DeviceType;
import com.mindspore.lite.config.MSConfig;

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.Random;
import java.util.zip.GZIPInputStream;

/**
 * Trains LeNet-5 on MNIST through TrainSession for one epoch, exports the inference model and evaluates it on
 * the test set in a plain LiteSession.
 *
 * <pre>java -cp mindspore-lite-java.jar:examples TrainLeNet lenet_train.ms mnist_dir lenet.ms [steps] [threads]</pre>
 *
 * The training model is LeNet-5 for 28x28 inputs converted with {@code --trainModel=true} (its batch size is
 * taken from the model); {@code steps} limits the epoch (default: all of it). Prints the mean loss of every 100
 * steps, then the test accuracy of the exported model. {@code mnist_dir} holds the MNIST database's four IDX files
 * under their usual names ({@code train-images-idx3-ubyte.gz} ..., gzip-compressed or not); when one is missing the
 * program says which and where it looked, in one line.
 */
public final class TrainLeNet {
    private static final float MEAN = 0.1307f;
    private static final float STD = 0.3081f;
    private static final int PIXELS = 28 * 28;
    private static final int TEST_BATCH = 1000;
    private static final String[] MNIST_FILES = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

    private TrainLeNet() {
    }

    public static void main(String[] args) throws IOException {
        if (args.length < 3) {
            System.err.println("usage: TrainLeNet lenet_train.ms mnist_dir lenet.ms [steps] [threads]");
            System.exit(2);
        }
        Path[] files = mnistFiles(Paths.get(args[1]));
        float[] trainImages = images(files[0]);
        int[] trainLabels = labels(files[1]);
        float[] testImages = images(files[2]);
        int[] testLabels = labels(files[3]);
        int threads = args.length > 4 ? Integer.parseInt(args[4]) : 2;

        try (MSConfig config = new MSConfig()) {
            config.init(DeviceType.DT_CPU, threads, CpuBindMode.MID_CPU);
            try (TrainSession session = TrainSession.createSession(args[0], config, true)) {
                List<MSTensor> inputs = session.getInputs();
                MSTensor image = inputs.get(0);
                MSTensor label = inputs.get(1);
                MSTensor loss = session.getOutputByTensorName("loss");
                int batch = image.getShape()[0];
                int steps = trainLabels.length / batch;
                if (args.length > 3) {
                    steps = Math.min(steps, Integer.parseInt(args[3]));
                }
                int[] order = shuffled(trainLabels.length, new Random(0));
                float[] x = new float[batch * PIXELS];
                int[] y = new int[batch];
                double sum = 0;
                for (int step = 0; step < steps; step++) {
                    for (int i = 0; i < batch; i++) {
                        int sample = order[step * batch + i];
                        System.arraycopy(trainImages, sample * PIXELS, x, i * PIXELS, PIXELS);
                        y[i] = trainLabels[sample];
                    }
                    image.setData(x);
                    label.setData(y);
                    session.runGraph();
                    sum += loss.getFloatData()[0];
                    if ((step + 1) % 100 == 0 || step + 1 == steps) {
                        int count = (step % 100) + 1;
                        System.out.printf("step %d loss %.6f%n", step + 1, sum / count);
                        sum = 0;
                    }
                }
                session.export(args[2], TrainSession.MT_INFERENCE, TrainSession.QT_DEFAULT);
            }
            System.out.printf("test accuracy %.4f%n", accuracy(args[2], config, testImages, testLabels));
        }
    }

    /** Accuracy of the exported inference model on the test set, TEST_BATCH images per run. */
    static double accuracy(String modelPath, MSConfig config, float[] images, int[] labels) {
        try (Model model = new Model(); LiteSession session = LiteSession.createSession(config)) {
            model.loadModel(modelPath);
            session.compileGraph(model);
            session.resize(session.getInputs(), new int[][] {{TEST_BATCH, 1, 28, 28}});
            MSTensor input = session.getInputs().get(0);
            MSTensor logits = session.getOutputByTensorName("logits");
            float[] x = new float[TEST_BATCH * PIXELS];
            int correct = 0;
            int total = labels.length / TEST_BATCH * TEST_BATCH;
            for (int start = 0; start < total; start += TEST_BATCH) {
                System.arraycopy(images, start * PIXELS, x, 0, x.length);
                input.setData(x);
                session.runGraph();
                float[] scores = logits.getFloatData();
                int classes = scores.length / TEST_BATCH;
                for (int i = 0; i < TEST_BATCH; i++) {
                    int best = 0;
                    for (int c = 1; c < classes; c++) {
                        if (scores[i * classes + c] > scores[i * classes + best]) {
                            best = c;
                        }
                    }
                    correct += best == labels[start + i] ? 1 : 0;
                }
            }
            return correct / (double) total;
        }
    }

    static int[] shuffled(int n, Random random) {
        int[] order = new int[n];
        for (int i = 0; i < n; i++) {
            order[i] = i;
        }
        for (int i = n - 1; i > 0; i--) {
            int j = random.nextInt(i + 1);
            int swap = order[i];
            order[i] = order[j];
            order[j] = swap;
        }
        return order;
    }

    /** IDX image file -> normalised float pixels, image after image. */
    static float[] images(Path path) throws IOException {
        try (DataInputStream in = idx(path, 2051)) {
            int count = in.readInt();
            int pixels = in.readInt() * in.readInt();
            byte[] raw = new byte[count * pixels];
            in.readFully(raw);
            float[] out = new float[raw.length];
            for (int i = 0; i < raw.length; i++) {
                out[i] = ((raw[i] & 0xff) / 255.0f - MEAN) / STD;
            }
            return out;
        }
    }

    static int[] labels(Path path) throws IOException {
        try (DataInputStream in = idx(path, 2049)) {
            byte[] raw = new byte[in.readInt()];
            in.readFully(raw);
            int[] out = new int[raw.length];
            for (int i = 0; i < raw.length; i++) {
                out[i] = raw[i] & 0xff;
            }
            return out;
        }
    }

    /** The four MNIST files in {@code dir} (NAME.gz or NAME); exits with a one-line message when one is missing. */
    static Path[] mnistFiles(Path dir) {
        Path[] found = new Path[MNIST_FILES.length];
        for (int i = 0; i < found.length; i++) {
            Path gz = dir.resolve(MNIST_FILES[i] + ".gz");
            found[i] = Files.isRegularFile(gz) ? gz : dir.resolve(MNIST_FILES[i]);
            if (!Files.isRegularFile(found[i])) {
                System.err.println("TrainLeNet: MNIST not found: no " + gz + " (or without .gz); put the four IDX files"
                        + " of the MNIST database (" + String.join(", ", MNIST_FILES) + ", .gz or not) in " + dir);
                System.exit(2);
            }
        }
        return found;
    }

    /** An IDX file (gzip-compressed or plain) positioned after its magic number, which must be {@code magic}. */
    private static DataInputStream idx(Path path, int magic) throws IOException {
        InputStream file = new BufferedInputStream(new FileInputStream(path.toFile()), 1 << 16);
        file.mark(2);
        boolean gzip = file.read() == 0x1f && file.read() == 0x8b;
        file.reset();
        DataInputStream in = new DataInputStream(gzip ? new GZIPInputStream(file, 1 << 16) : file);
        if (in.readInt() != magic) {
            in.close();
            throw new IOException(path + " is not an IDX file of magic " + magic);
        }
        return in;
    }
}
