import com.mindspore.lite.LiteSession;
import com.mindspore.lite.MSTensor;
import com.mindspore.lite.Model;
import com.mindspore.lite.config.CpuBindMode;
import com.mindspore.lite.config.DeviceType;
import com.mindspore.lite.config.MSConfig;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

/**
 * The Java half of bench/bench_jni.py: one session over MODEL; for every line "loop N" or "call N" on stdin,
 * times N iterations of setData(float[]) + runGraph() + getFloatData() ("loop") or of a trivial native call,
 * elementsNum() ("call"), and prints the microseconds per iteration.
 *
 * <pre>java -cp mindspore-lite-java.jar:. LeNetLoop model.ms threads</pre>
 */
public final class LeNetLoop {
    private LeNetLoop() {
    }

    public static void main(String[] args) throws Exception {
        MSConfig config = new MSConfig();
        config.init(DeviceType.DT_CPU, Integer.parseInt(args[1]), CpuBindMode.MID_CPU);
        Model model = new Model();
        model.loadModel(args[0]);
        LiteSession session = LiteSession.createSession(config);
        session.compileGraph(model);
        MSTensor input = session.getInputs().get(0);
        MSTensor output = session.getOutputMapByTensor().values().iterator().next();
        float[] x = new float[input.elementsNum()];
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) Math.sin(i);
        }
        BufferedReader commands = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        System.out.println("ready");
        System.out.flush();
        float sink = 0;
        for (String line = commands.readLine(); line != null; line = commands.readLine()) {
            String[] words = line.trim().split(" ");
            int n = Integer.parseInt(words[1]);
            long started = System.nanoTime();
            if (words[0].equals("loop")) {
                for (int i = 0; i < n; i++) {
                    input.setData(x);
                    session.runGraph();
                    sink += output.getFloatData()[0];
                }
            } else {
                for (int i = 0; i < n; i++) {
                    sink += input.elementsNum();
                }
            }
            System.out.println((System.nanoTime() - started) / 1e3 / n);
            System.out.flush();
        }
        System.err.println("checksum " + sink);
    }
}
