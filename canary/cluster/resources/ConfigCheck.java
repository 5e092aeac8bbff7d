// Checks broker config values against a Kafka release's own definitions (the ConfigDef the broker parses its
// properties with), for the keys a running broker cannot check with a validate-only AlterConfigs (static ones).
//   java -cp 'libs/*' ConfigCheck.java < pairs
// stdin: one pair a line, key and value each Base64 (any character is safe, nothing is on the command line).
// stdout: one line a pair: "ok <key>", "unknown <key>" (a key the release does not define: a custom one, or a
// typo) or "invalid <key> <message>" with the broker's own message.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.server.config.AbstractKafkaConfig;

public class ConfigCheck {
    public static void main(String[] args) throws Exception {
        ConfigDef definitions = AbstractKafkaConfig.CONFIG_DEF;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            String[] pair = line.trim().split(" ", -1);
            String key = decode(pair[0]);
            String value = pair.length > 1 ? decode(pair[1]) : "";
            ConfigDef.ConfigKey known = definitions.configKeys().get(key);
            if (known == null) {
                System.out.println("unknown " + key);
                continue;
            }
            try {
                Object parsed = ConfigDef.parseType(key, value, known.type);
                if (known.validator != null) known.validator.ensureValid(key, parsed);
                System.out.println("ok " + key);
            } catch (RuntimeException e) {
                System.out.println("invalid " + key + " " + String.valueOf(e.getMessage()).replace('\n', ' '));
            }
        }
    }

    private static String decode(String text) {
        return new String(Base64.getDecoder().decode(text), StandardCharsets.UTF_8);
    }
}
