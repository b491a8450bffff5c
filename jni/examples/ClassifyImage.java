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
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Comparator;
import javax.imageio.ImageIO;

/**
 * Image classification with a converted .ms model (e.g. MobileNetV2): prints the top-5 classes.
 *
 * <pre>java -cp mindspore-lite-java.jar:examples ClassifyImage model.ms image.png|photo.jpg|input.bin [threads]</pre>
 *
 * An image is scaled so that its shorter side is 256/224 of the model's input size, centre-cropped to the input
 * size and normalised with the ImageNet mean and deviation, NCHW. A .bin file is the raw float32 input tensor in
 * native byte order; it is handed over as a direct ByteBuffer.
 */
public final class ClassifyImage {
    private static final float[] MEAN = {0.485f, 0.456f, 0.406f};
    private static final float[] STD = {0.229f, 0.224f, 0.225f};

    private ClassifyImage() {
    }

    public static void main(String[] args) throws IOException {
        if (args.length < 2) {
            System.err.println("usage: ClassifyImage model.ms image|input.bin [threads]");
            System.exit(2);
        }
        int threads = args.length > 2 ? Integer.parseInt(args[2]) : 2;
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
                Integer[] order = new Integer[scores.length];
                Arrays.setAll(order, i -> i);
                Arrays.sort(order, Comparator.comparingDouble((Integer i) -> -scores[i]));
                System.out.println("output '" + output.tensorName() + "' " + Arrays.toString(output.getShape()));
                for (int rank = 0; rank < Math.min(5, scores.length); rank++) {
                    System.out.println("top" + (rank + 1) + " class " + order[rank] + " score " + scores[order[rank]]);
                }
            }
        }
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
