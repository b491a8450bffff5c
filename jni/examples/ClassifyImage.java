import com.mindspore.lite.LiteSession;
import com.mindspore.lite.MSTensor;
import com.mindspore.lite.Model;
import com.mindspore.lite.config.CpuBindMode;
import com.mindspore.lite.config.DeviceType;
import com.mindspore.lite.config.MSConfig;

import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.image.BufferedImage;
import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import javax.imageio.ImageIO;

/**
 * Image classification with a converted ImageNet .ms model: prints the top-5 classes with their names.
 *
 * <pre>
 * java -cp mindspore-lite-java.jar:examples ClassifyImage model.ms image.png|photo.jpg|input.bin [labels.txt] [threads]
 * </pre>
 *
 * The model to use is the real EfficientNet-Lite0 with its ImageNet weights: {@code python examples/quickstart.py
 * --keep DIR} writes it as {@code DIR/efficientnet_lite0.ms} (float32) and {@code DIR/efficientnet_lite0_int8.ms}.
 * {@code labels.txt} holds one class name per line in class-index order, lines starting with '#' skipped (default:
 * {@code models/imagenet_classes.txt}, found when run from the checkout's root; without it only class numbers are
 * printed). An image is scaled so that its shorter side is 256/224 of the model's input size, centre-cropped to
 * the input size and normalised with the ImageNet mean and deviation, NCHW. A .bin file is the raw float32 input
 * tensor in native byte order; it is handed over as a direct ByteBuffer.
 */
public final class ClassifyImage {
    private static final float[] MEAN = {0.485f, 0.456f, 0.406f};
    private static final float[] STD = {0.229f, 0.224f, 0.225f};
    private static final String DEFAULT_LABELS = "models/imagenet_classes.txt";

    private ClassifyImage() {
    }

    public static void main(String[] args) throws IOException {
        if (args.length < 2) {
            System.err.println("usage: ClassifyImage model.ms image|input.bin [labels.txt] [threads]");
            System.exit(2);
        }
        if (!Files.isRegularFile(Paths.get(args[0]))) {
            fail(args[0] + " not found: make the real EfficientNet-Lite0 with"
                    + " `python examples/quickstart.py --keep DIR` (it writes DIR/efficientnet_lite0.ms)");
        }
        List<String> labels = labels(args.length > 2 ? args[2] : null);
        int threads = args.length > 3 ? Integer.parseInt(args[3]) : 2;
        try (MSConfig config = new MSConfig(); Model model = new Model()) {
            config.init(DeviceType.DT_CPU, threads, CpuBindMode.MID_CPU);
            model.loadModel(args[0]);
            try (LiteSession session = LiteSession.createSession(config)) {
                session.compileGraph(model);
                MSTensor input = session.getInputs().get(0);
                int[] shape = input.getShape();
                if (args[1].endsWith(".bin")) {
                    byte[] raw = Files.readAllBytes(Paths.get(args[1]));
                    ByteBuffer buffer = ByteBuffer.allocateDirect(raw.length).order(ByteOrder.nativeOrder());
                    buffer.put(raw).flip();
                    input.setData(buffer);
                } else {
                    input.setData(preprocess(ImageIO.read(new File(args[1])), shape[2], shape[3]));
                }
                session.runGraph();
                MSTensor output = session.getOutputMapByTensor().values().iterator().next();
                float[] scores = output.getFloatData();
                if (labels != null && labels.size() != scores.length) {
                    fail("the labels file names " + labels.size() + " classes, the model scores " + scores.length);
                }
                Integer[] order = new Integer[scores.length];
                Arrays.setAll(order, i -> i);
                Arrays.sort(order, Comparator.comparingDouble((Integer i) -> -scores[i]));
                System.out.println("output '" + output.tensorName() + "' " + Arrays.toString(output.getShape()));
                for (int rank = 0; rank < Math.min(5, scores.length); rank++) {
                    int c = order[rank];
                    System.out.println("top" + (rank + 1) + " class " + c + " score " + scores[c]
                            + (labels != null ? " " + labels.get(c) : ""));
                }
            }
        }
    }

    /** The class names of {@code path} (the default file, when null and present), or null: numbers only. */
    static List<String> labels(String path) throws IOException {
        Path file = Paths.get(path != null ? path : DEFAULT_LABELS);
        if (!Files.isRegularFile(file)) {
            if (path != null) {
                fail("labels file " + path + " not found");
            }
            System.err.println("no " + DEFAULT_LABELS + " here (run from the checkout's root or pass labels.txt):"
                    + " printing class numbers only");
            return null;
        }
        List<String> names = new ArrayList<>();
        for (String line : Files.readAllLines(file)) {
            if (!line.isEmpty() && !line.startsWith("#")) {
                names.add(line);
            }
        }
        return names;
    }

    /** One line on stderr and exit status 2: a usage problem, not a stack trace. */
    static void fail(String message) {
        System.err.println("ClassifyImage: " + message);
        System.exit(2);
    }

    /** RGB image -> normalised float NCHW [1, 3, height, width]. */
    static float[] preprocess(BufferedImage image, int height, int width) {
        if (image == null) {
            throw new IllegalArgumentException("not a readable image");
        }
        double scale = Math.round(height * 256.0 / 224.0) / (double) Math.min(image.getWidth(), image.getHeight());
        int scaledWidth = Math.max(width, (int) Math.round(image.getWidth() * scale));
        int scaledHeight = Math.max(height, (int) Math.round(image.getHeight() * scale));
        BufferedImage scaled = new BufferedImage(scaledWidth, scaledHeight, BufferedImage.TYPE_INT_RGB);
        Graphics2D graphics = scaled.createGraphics();
        graphics.setRenderingHint(RenderingHints.KEY_INTERPOLATION, RenderingHints.VALUE_INTERPOLATION_BILINEAR);
        graphics.drawImage(image, 0, 0, scaledWidth, scaledHeight, null);
        graphics.dispose();
        int top = (scaledHeight - height) / 2;
        int left = (scaledWidth - width) / 2;
        float[] data = new float[3 * height * width];
        for (int y = 0; y < height; y++) {
            for (int x = 0; x < width; x++) {
                int rgb = scaled.getRGB(left + x, top + y);
                for (int c = 0; c < 3; c++) {
                    float value = ((rgb >> (16 - 8 * c)) & 0xff) / 255.0f;
                    data[(c * height + y) * width + x] = (value - MEAN[c]) / STD[c];
                }
            }
        }
        return data;
    }
}
