// Runs many keytool commands in one JVM (a JVM start per command costs about a second on a busy machine).
// Reads one command per line from stdin, its arguments separated by tabs; passwords come as
// `-storepass:env NAME`, never on a command line. keytool exits the JVM with status 1 on its first error.
// Launched as a single-file source program:
//   java --add-exports java.base/sun.security.tools.keytool=ALL-UNNAMED Keytool.java < commands
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

public class Keytool {
    public static void main(String[] ignored) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        List<String[]> commands = new ArrayList<>();
        for (String line; (line = in.readLine()) != null; ) {
            if (!line.isBlank()) {
                commands.add(line.split("\t"));
            }
        }
        System.out.println("kafka-canary keytool batch: " + commands.size() + " commands");
        for (String[] args : commands) {
            sun.security.tools.keytool.Main.main(args);
        }
    }
}
