// sqlite-jdbc on lane SQLite: a check and a benchmark (docs/lane-sqlite.md,
// "Java: sqlite-jdbc"). Plain Java 11+, no package; build and run with the
// sqlite-jdbc jar on the class path:
//
//   javac -cp sqlite-jdbc.jar -d OUT LaneJdbc.java
//   java -cp sqlite-jdbc.jar:OUT LaneJdbc info DB
//   java -cp sqlite-jdbc.jar:OUT LaneJdbc run [--procs N] [--rows R]
//        [--sync NORMAL|FULL] [--timeout MS] DB
//
// Which SQLite a JVM uses is chosen by sqlite-jdbc's own system properties:
// with -Dorg.sqlite.lib.path=DIR -Dorg.sqlite.lib.name=libsqlitejdbc.so it
// loads DIR/libsqlitejdbc.so, without them the library bundled in the jar.
// `run` starts N writer JVMs with the same class path and the same two
// properties (so a run is all stock or all lane), each inserting R rows, one
// row per transaction (autocommit), with the busy timeout given; then it
// checks every acknowledged row is in the file and prints one RESULT line.
//
// Exit status: 0 when every writer finished, 1 when a row acknowledged by a
// writer is missing, 2 on a setup error. "database is locked" errors are
// counted and printed, not a failure of this program (the caller decides).

import java.io.*;
import java.nio.file.*;
import java.sql.*;
import java.util.*;

public class LaneJdbc {
    // Passed on to the writer JVMs: the native library sqlite-jdbc loads, and
    // where it extracts its bundled one.
    static final String[] LIB_PROPS = {"org.sqlite.lib.path", "org.sqlite.lib.name", "java.io.tmpdir"};

    public static void main(String[] args) throws Exception {
        if (args.length < 1) usage();
        switch (args[0]) {
            case "info": info(args); break;
            case "run": run(args); break;
            case "writer": writer(args); break;
            default: usage();
        }
    }

    static void usage() {
        System.err.println("usage: LaneJdbc info DB | run [--procs N] [--rows R] [--sync NORMAL|FULL] [--timeout MS] DB");
        System.exit(2);
    }

    static Connection open(String db, int timeoutMs, String sync) throws SQLException {
        Properties p = new Properties();
        p.setProperty("busy_timeout", Integer.toString(timeoutMs));
        p.setProperty("journal_mode", "WAL");
        p.setProperty("synchronous", sync);
        return DriverManager.getConnection("jdbc:sqlite:" + db, p);
    }

    /** The first column of the first row; "(none)" when the statement
     *  returns no rows (as an unknown pragma, e.g. PRAGMA lane on stock). */
    static String one(Statement s, String sql) throws SQLException {
        if (!s.execute(sql)) return "(none)";
        try (ResultSet r = s.getResultSet()) {
            return r.next() ? r.getString(1) : "(none)";
        }
    }

    /** The library this JVM mapped (from /proc/self/maps). */
    static String mappedNative() throws IOException {
        for (String line : Files.readAllLines(Paths.get("/proc/self/maps"))) {
            int i = line.indexOf('/');
            if (i >= 0 && line.contains("sqlitejdbc")) return line.substring(i);
        }
        return "(none)";
    }

    // What a program sees: version, options, journal mode, and PRAGMA lane
    // after a first write (the queue opens at the first write).
    static void info(String[] a) throws Exception {
        if (a.length != 2) usage();
        try (Connection c = open(a[1], 5000, "NORMAL"); Statement s = c.createStatement()) {
            s.executeUpdate("CREATE TABLE IF NOT EXISTS lane_info(x)");
            s.executeUpdate("INSERT INTO lane_info VALUES (1)");
            System.out.println("native library: " + mappedNative());
            System.out.println("sqlite_version: " + one(s, "SELECT sqlite_version()"));
            List<String> opts = new ArrayList<>();
            try (ResultSet r = s.executeQuery("PRAGMA compile_options")) {
                while (r.next()) opts.add(r.getString(1));
            }
            System.out.println("ENABLE_SETLK_TIMEOUT: " + opts.stream().anyMatch(o -> o.startsWith("ENABLE_SETLK_TIMEOUT")));
            System.out.println("JDBC_EXTENSIONS: " + opts.contains("JDBC_EXTENSIONS"));
            System.out.println("journal_mode: " + one(s, "PRAGMA journal_mode"));
            System.out.println("busy_timeout: " + one(s, "PRAGMA busy_timeout"));
            System.out.println("lane: " + one(s, "PRAGMA lane"));
        }
    }

    // One writer JVM: waits for GO, inserts its rows, prints one line.
    static void writer(String[] a) throws Exception {
        String db = a[1];
        int id = Integer.parseInt(a[2]), rows = Integer.parseInt(a[3]), timeout = Integer.parseInt(a[4]);
        String sync = a[5];
        Path ready = Paths.get(a[6] + ".ready." + id), go = Paths.get(a[6] + ".go");
        Path acked = Paths.get(a[6] + ".acked." + id);
        int ok = 0, locked = 0, other = 0;
        long maxNs = 0, sumNs = 0;
        String lane, firstOther = "";
        long t0, t1;
        try (Connection c = open(db, timeout, sync);
             PreparedStatement ins = c.prepareStatement("INSERT INTO t(writer, seq, payload) VALUES (?, ?, ?)");
             Statement s = c.createStatement();
             BufferedWriter out = Files.newBufferedWriter(acked)) {
            s.executeQuery("SELECT count(*) FROM t").close(); // warm: schema read, JIT of the path
            Files.createFile(ready);
            while (!Files.exists(go)) Thread.sleep(1);
            t0 = System.nanoTime();
            for (int seq = 0; seq < rows; seq++) {
                ins.setInt(1, id);
                ins.setInt(2, seq);
                ins.setString(3, "writer " + id + " row " + seq);
                long s0 = System.nanoTime();
                try {
                    ins.executeUpdate(); // autocommit: one row, one transaction
                    ok++;
                    out.write(Integer.toString(seq));
                    out.newLine();
                } catch (SQLException e) {
                    String m = String.valueOf(e.getMessage());
                    if (m.contains("database is locked") || m.contains("SQLITE_BUSY")) locked++;
                    else { other++; if (firstOther.isEmpty()) firstOther = m; }
                }
                long d = System.nanoTime() - s0;
                sumNs += d;
                if (d > maxNs) maxNs = d;
            }
            t1 = System.nanoTime();
            lane = one(s, "PRAGMA lane");
        }
        System.out.printf("WRITER id=%d ok=%d locked=%d other=%d max_ms=%.1f mean_ms=%.2f secs=%.3f end=%d lane=%s%s%n",
                id, ok, locked, other, maxNs / 1e6, sumNs / 1e6 / rows, (t1 - t0) / 1e9, System.currentTimeMillis(),
                lane.replace(' ', '_'), firstOther.isEmpty() ? "" : " first_other=" + firstOther.replace(' ', '_'));
    }

    static void run(String[] a) throws Exception {
        int procs = 8, rows = 500, timeout = 5000;
        String sync = "NORMAL", db = null;
        for (int i = 1; i < a.length; i++) {
            switch (a[i]) {
                case "--procs": procs = Integer.parseInt(a[++i]); break;
                case "--rows": rows = Integer.parseInt(a[++i]); break;
                case "--sync": sync = a[++i]; break;
                case "--timeout": timeout = Integer.parseInt(a[++i]); break;
                default: if (db != null || a[i].startsWith("-")) usage(); db = a[i];
            }
        }
        if (db == null) usage();
        for (String suffix : new String[]{"", "-wal", "-shm", "-journal"}) Files.deleteIfExists(Paths.get(db + suffix));
        String tag = db + ".run";
        for (File f : Optional.ofNullable(new File(db).getAbsoluteFile().getParentFile().listFiles()).orElse(new File[0]))
            if (f.getPath().startsWith(new File(tag).getAbsolutePath())) f.delete();
        try (Connection c = open(db, timeout, sync); Statement s = c.createStatement()) {
            s.executeUpdate("CREATE TABLE t(writer INTEGER, seq INTEGER, payload TEXT, PRIMARY KEY(writer, seq))");
        }
        List<String> cmd0 = new ArrayList<>();
        cmd0.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
        cmd0.add("-Xmx64m");
        cmd0.add("-XX:+UseSerialGC");
        for (String p : LIB_PROPS)
            if (System.getProperty(p) != null) cmd0.add("-D" + p + "=" + System.getProperty(p));
        cmd0.add("-cp");
        cmd0.add(System.getProperty("java.class.path"));
        cmd0.add("LaneJdbc");
        cmd0.add("writer");
        List<Process> ps = new ArrayList<>();
        for (int id = 0; id < procs; id++) {
            List<String> cmd = new ArrayList<>(cmd0);
            Collections.addAll(cmd, db, Integer.toString(id), Integer.toString(rows), Integer.toString(timeout), sync, tag);
            ps.add(new ProcessBuilder(cmd).redirectErrorStream(true).start());
        }
        // Start them together once every JVM is up and has opened the file.
        long deadline = System.currentTimeMillis() + 120_000;
        for (int id = 0; id < procs; id++) {
            while (!Files.exists(Paths.get(tag + ".ready." + id))) {
                if (System.currentTimeMillis() > deadline || !ps.get(id).isAlive() && !Files.exists(Paths.get(tag + ".ready." + id))) {
                    System.err.println("writer " + id + " did not start: " + new String(ps.get(id).getInputStream().readAllBytes()));
                    for (Process p : ps) p.destroyForcibly();
                    System.exit(2);
                }
                Thread.sleep(5);
            }
        }
        long go = System.currentTimeMillis();
        Files.createFile(Paths.get(tag + ".go"));
        long ok = 0, locked = 0, other = 0, end = go;
        double maxMs = 0;
        Set<String> lanes = new TreeSet<>();
        boolean allDone = true;
        for (int id = 0; id < procs; id++) {
            Process p = ps.get(id);
            String outText = new String(p.getInputStream().readAllBytes());
            p.waitFor();
            String line = outText.lines().filter(l -> l.startsWith("WRITER ")).findFirst().orElse(null);
            if (line == null) {
                System.err.println("writer " + id + " failed (exit " + p.exitValue() + "): " + outText);
                allDone = false;
                continue;
            }
            System.out.println(line);
            Map<String, String> kv = new HashMap<>();
            for (String f : line.split(" ")) { int e = f.indexOf('='); if (e > 0) kv.put(f.substring(0, e), f.substring(e + 1)); }
            ok += Long.parseLong(kv.get("ok"));
            locked += Long.parseLong(kv.get("locked"));
            other += Long.parseLong(kv.get("other"));
            maxMs = Math.max(maxMs, Double.parseDouble(kv.get("max_ms")));
            end = Math.max(end, Long.parseLong(kv.get("end")));
            String l = kv.get("lane");
            lanes.add(l.startsWith("on:") ? "on" : l.startsWith("off:") ? "off" : l);
        }
        // Every acknowledged row must be in the file.
        Set<Long> present = new HashSet<>();
        long inFile;
        try (Connection c = open(db, timeout, sync); Statement s = c.createStatement();
             ResultSet r = s.executeQuery("SELECT writer, seq FROM t")) {
            while (r.next()) present.add(((long) r.getInt(1) << 32) | r.getInt(2));
            inFile = present.size();
        }
        long lost = 0;
        for (int id = 0; id < procs; id++) {
            Path f = Paths.get(tag + ".acked." + id);
            if (!Files.exists(f)) continue;
            for (String s : Files.readAllLines(f)) if (!present.contains(((long) id << 32) | Long.parseLong(s))) lost++;
        }
        double secs = Math.max(1, end - go) / 1000.0;
        System.out.printf("RESULT native=%s procs=%d rows_each=%d sync=%s timeout_ms=%d acknowledged=%d in_file=%d lost=%d locked=%d other_errors=%d "
                        + "rows_per_s=%.0f wall_s=%.2f longest_insert_ms=%.1f lane=%s%n",
                System.getProperty("org.sqlite.lib.path") == null ? "bundled" : System.getProperty("org.sqlite.lib.path"),
                procs, rows, sync, timeout, ok, inFile, lost, locked, other, ok / secs, secs, maxMs, String.join(",", lanes));
        System.exit(lost > 0 ? 1 : allDone ? 0 : 2);
    }
}
