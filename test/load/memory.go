package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// memoryPoint is dsguard's memory at one moment of the run. RSS is the sum
// of anonymous memory (the Go heap, stacks and runtime: what the process
// allocated) and file pages (the parts of the binary it has touched; clean,
// so the kernel can reclaim them under pressure, but they count in RSS and
// in a container's working set).
type memoryPoint struct {
	moment          string
	rss, anon, file int64
	// blocks and fullBlocks are the binary's fault-around blocks with
	// resident pages, and those resident throughout (process.binaryBlocks).
	blocks, fullBlocks int
	heap               heapStats
	heapErr            error
}

// heapStats are the Go runtime's heap figures (runtime.MemStats), as the
// Go collector of dsguard's metrics exports them (go_memstats_*).
type heapStats struct {
	// alloc is the heap's live objects and the garbage not yet collected;
	// inuse the spans holding them; fromOS what the heap holds from the
	// operating system (HeapSys less HeapReleased); nextGC the heap size
	// at which the next collection starts.
	alloc, inuse, fromOS, nextGC int64
}

// memoryNow returns dsguard's memory now, as moment, and with -profile
// (profileDir) writes its heap profile there (dsguard-heap-<moment>.pb.gz).
func (e *environment) memoryNow(moment, profileDir string) memoryPoint {
	p := e.dsguard.memory(moment)
	p.heap, p.heapErr = e.readHeapStats()
	logf("dsguard memory %s: RSS %s (anonymous %s, binary %s), Go heap in use %s", moment, mib(p.rss), mib(p.anon),
		mib(p.file), mib(p.heap.inuse))
	if profileDir != "" && e.dsguardPprof != "" {
		path := filepath.Join(profileDir, "dsguard-heap-"+slug(moment)+".pb.gz")
		if err := fetch(e.dsguardPprof+"/debug/pprof/heap", path); err != nil {
			logf("heap profile %s: %v", moment, err)
		}
	}
	return p
}

// floorMemoryNow returns the no-op webhook's RSS: what a controller-runtime
// webhook process that holds no caches and judges nothing costs, beside
// dsguard's own figures.
func (e *environment) floorMemoryNow() memoryPoint {
	p := e.noop.memory("floor")
	logf("no-op webhook memory: RSS %s (anonymous %s, binary %s)", mib(p.rss), mib(p.anon), mib(p.file))
	return p
}

// memory returns the process's RSS and its split, as moment.
func (p *process) memory(moment string) memoryPoint {
	m := memoryPoint{moment: moment}
	m.rss, _ = p.status("VmRSS:")
	m.anon, _ = p.status("RssAnon:")
	m.file, _ = p.status("RssFile:")
	m.blocks, m.fullBlocks, _ = p.binaryBlocks()
	return m
}

// fetch writes what url answers to path.
func fetch(url, path string) error {
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, data)
	}
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// slug turns a moment's name into a file name part.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(s) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

// writeMemory prints the memory table.
func (r *report) writeMemory(w io.Writer) {
	fmt.Fprintln(w, "### dsguard memory through the run")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| moment | RSS | anonymous | binary pages | Go heap alloc | Go heap in use | Go heap from the OS | next GC at |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, p := range r.memory {
		heap := "| - | - | - | -"
		if p.heapErr == nil {
			heap = fmt.Sprintf("| %s | %s | %s | %s", mib(p.heap.alloc), mib(p.heap.inuse), mib(p.heap.fromOS), mib(p.heap.nextGC))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s %s |\n", p.moment, mib(p.rss), mib(p.anon), binaryPages(p), heap)
	}
	if f := r.floorMemory; f.rss > 0 {
		fmt.Fprintf(w, "| floor: the no-op webhook, settled | %s | %s | %s | - | - | - | - |\n", mib(f.rss), mib(f.anon), binaryPages(f))
	}
	fmt.Fprintf(w, "\nPeak RSS (VmHWM) over the run: %s. Binary pages are the pages of the process's executable mapped "+
		"into it: clean and reclaimable, but counted in RSS. The kernel maps them in blocks of %d KiB around each "+
		"fault (fault-around), so where nearly every block is full they measure how widely the code that ran is "+
		"spread over the executable, not how much of it ran. Both executables were dropped from the page cache "+
		"before they started, so that they are read from disk as after a node's restart: pages left by the build "+
		"can be large folios, of which a fault maps more. The no-op's is a copy of the harness's executable, which "+
		"shares no pages with the load generator. "+
		"The Go heap figures are scraped from dsguard's metrics endpoint, served as the chart serves it (HTTPS, "+
		"TokenReview and SubjectAccessReview), over one kept-alive connection as Prometheus scrapes.",
		mib(r.peakRSS), faultAround>>10)
	if r.opts.profile != "" {
		fmt.Fprintf(w, " The heap profiles of these moments are in %s (taking them symbolises allocation stacks, "+
			"which maps more of dsguard's executable).", r.opts.profile)
	}
	fmt.Fprint(w, "\n\n")
}

// binaryPages is a memory point's binary pages, with their fault-around
// blocks when they were read.
func binaryPages(p memoryPoint) string {
	if p.blocks == 0 {
		return mib(p.file)
	}
	return fmt.Sprintf("%s (%d blocks, %d full)", mib(p.file), p.blocks, p.fullBlocks)
}
