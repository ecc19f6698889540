// Lucene 8 (Debian's liblucene8-java) keeping each document's whole JSON line as a stored field, to
// compare its stored-fields size (.fdt/.fdx/.fdm) with the index's `source` column family.
// Input: one document per line, "<tokens>\t<the original JSON line>" (prepare.py writes it). The
// tokens go to an indexed, unstored "contents" field as in shared/anchors/lucene; the JSON line goes
// byte for byte to one StoredField "_source" (a BytesRef, as Elasticsearch keeps _source).
// usage: LuceneStored INPUT DIR speed|compression
//   speed: Lucene87Codec Mode.BEST_SPEED (LZ4, the default and Elasticsearch's "default" codec);
//   compression: Mode.BEST_COMPRESSION (DEFLATE, Elasticsearch's "best_compression").
// Prints one JSON line: docs, input bytes, stored-fields bytes per file and per document, build
// time, and the mean time to read one random document's _source back (warm, one thread), after
// checking 1,000 random documents read back byte-identical to their input lines.
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;
import org.apache.lucene.analysis.*;
import org.apache.lucene.analysis.core.WhitespaceTokenizer;
import org.apache.lucene.codecs.lucene87.Lucene87Codec;
import org.apache.lucene.document.*;
import org.apache.lucene.index.*;
import org.apache.lucene.store.*;
import org.apache.lucene.util.BytesRef;

public class LuceneStored {
  public static void main(String[] a) throws Exception {
    if (a.length != 3 || !(a[2].equals("speed") || a[2].equals("compression"))) {
      System.err.println("usage: LuceneStored INPUT DIR speed|compression");
      System.exit(2);
    }
    Path input = Paths.get(a[0]), dir = Paths.get(a[1]);
    Lucene87Codec.Mode mode =
        a[2].equals("speed") ? Lucene87Codec.Mode.BEST_SPEED : Lucene87Codec.Mode.BEST_COMPRESSION;
    Analyzer analyzer = new Analyzer() {
      protected TokenStreamComponents createComponents(String f) {
        return new TokenStreamComponents(new WhitespaceTokenizer());
      }
    };
    IndexWriterConfig cfg = new IndexWriterConfig(analyzer);
    cfg.setCodec(new Lucene87Codec(mode));
    cfg.setRAMBufferSizeMB(512);
    cfg.setOpenMode(IndexWriterConfig.OpenMode.CREATE);
    cfg.setUseCompoundFile(false);  // the stored-fields files stay visible by extension
    TieredMergePolicy mp = new TieredMergePolicy();
    mp.setNoCFSRatio(0.0);
    cfg.setMergePolicy(mp);
    long t0 = System.nanoTime(), inputBytes = 0;
    int n = 0;
    try (IndexWriter w = new IndexWriter(FSDirectory.open(dir), cfg);
         BufferedReader r = Files.newBufferedReader(input, StandardCharsets.UTF_8)) {
      for (String line; (line = r.readLine()) != null; ) {
        int tab = line.indexOf('\t');
        if (tab < 0) throw new IOException("line " + (n + 1) + ": no tab");
        byte[] src = line.substring(tab + 1).getBytes(StandardCharsets.UTF_8);
        Document d = new Document();
        d.add(new TextField("contents", line.substring(0, tab), Field.Store.NO));
        d.add(new StoredField("_source", new BytesRef(src)));
        w.addDocument(d);
        inputBytes += src.length;
        n++;
      }
      w.forceMerge(1);
    }
    double buildS = (System.nanoTime() - t0) / 1e9;
    long fdt = 0, fdx = 0, fdm = 0, all = 0;
    try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir)) {
      for (Path p : ds) {
        long s = Files.size(p);
        String f = p.getFileName().toString();
        all += s;
        if (f.endsWith(".fdt")) fdt += s;
        else if (f.endsWith(".fdx")) fdx += s;
        else if (f.endsWith(".fdm")) fdm += s;
        else if (f.endsWith(".cfs")) throw new IOException("compound file " + f + ": stored fields not separable");
      }
    }
    // Read back: 1,000 random documents against their input lines, then timed random reads.
    List<byte[]> lines = new ArrayList<>(n);
    try (BufferedReader r = Files.newBufferedReader(input, StandardCharsets.UTF_8)) {
      for (String line; (line = r.readLine()) != null; )
        lines.add(line.substring(line.indexOf('\t') + 1).getBytes(StandardCharsets.UTF_8));
    }
    double fetchUs;
    try (DirectoryReader reader = DirectoryReader.open(FSDirectory.open(dir))) {
      if (reader.leaves().size() != 1 || reader.maxDoc() != n) throw new IOException("not one segment of " + n);
      Random rnd = new Random(1);
      for (int i = 0; i < 1000; i++) {
        int doc = rnd.nextInt(n);
        BytesRef got = reader.document(doc).getBinaryValue("_source");
        if (got == null
            || !Arrays.equals(Arrays.copyOfRange(got.bytes, got.offset, got.offset + got.length), lines.get(doc)))
          throw new IOException("doc " + doc + ": stored _source differs from its input line");
      }
      long sink = 0;
      for (int i = 0; i < 20000; i++)  // warm-up
        sink += reader.document(rnd.nextInt(n)).getBinaryValue("_source").length;
      final int reads = 100000;
      long f0 = System.nanoTime();
      for (int i = 0; i < reads; i++) sink += reader.document(rnd.nextInt(n)).getBinaryValue("_source").length;
      fetchUs = (System.nanoTime() - f0) / 1e3 / reads;
      if (sink == 42) System.out.print("");
    }
    long stored = fdt + fdx + fdm;
    System.out.printf(Locale.ROOT,
        "{\"engine\": \"lucene-8\", \"mode\": \"%s\", \"docs\": %d, \"input_bytes\": %d, \"fdt\": %d, \"fdx\": %d, "
            + "\"fdm\": %d, \"stored_bytes\": %d, \"stored_bytes_per_doc\": %.1f, \"input_bytes_per_doc\": %.1f, "
            + "\"stored_to_input\": %.4f, \"index_bytes\": %d, \"build_s\": %.1f, \"random_fetch_us\": %.2f}%n",
        mode, n, inputBytes, fdt, fdx, fdm, stored, (double) stored / n, (double) inputBytes / n,
        (double) stored / inputBytes, all, buildS, fetchUs);
  }
}
