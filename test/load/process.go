package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is a child the harness measures through /proc.
type process struct {
	name    string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	logPath string
}

// startProcess starts bin with args and extra environment variables env.
func startProcess(dir, name string, env []string, bin string, args ...string) (*process, error) {
	p := &process{name: name, logPath: filepath.Join(dir, name+".log"), exited: make(chan struct{})}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.Env = append(os.Environ(), env...)
	// Nothing outlives the harness, even when it is killed.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { p.waitErr = p.cmd.Wait(); logFile.Close(); close(p.exited) }()
	return p, nil
}

func (p *process) log() string {
	b, _ := os.ReadFile(p.logPath)
	const tail = 4000
	if len(b) > tail {
		b = b[len(b)-tail:]
	}
	return string(b)
}

// waitHTTP polls url until it answers 200.
func (p *process) waitHTTP(ctx context.Context, url string, tlsConfig *tls.Config, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited (%v):\n%s", p.name, p.waitErr, p.log())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("%s not ready after %s:\n%s", p.name, timeout, p.log())
}

func (p *process) stop() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s had exited (%v):\n%s", p.name, p.waitErr, p.log())
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not stop within 15s of SIGTERM", p.name)
	}
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// cpu returns the CPU time the process has used so far (user + system).
func (p *process) cpu() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: fields count from the
	// last ')'. utime and stime are fields 14 and 15.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, errors.New("short /proc stat line")
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// rss returns the resident set size in bytes.
func (p *process) rss() (int64, error) { return p.status("VmRSS:") }

// peakRSS returns the largest resident set size so far, 0 if unknown.
func (p *process) peakRSS() int64 {
	v, _ := p.status("VmHWM:")
	return v
}

func (p *process) status(key string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("%s not in /proc status", key)
}

// usage samples a process over a window: CPU as a share of one core, RSS
// average and maximum (sampled every 250 ms).
type usage struct {
	cpu            float64
	rssAvg, rssMax int64
}

// sampler measures a process from start until done is called.
type sampler struct {
	p        *process
	start    time.Time
	cpuStart time.Duration
	stopped  chan struct{}
	result   chan usage
}

func (p *process) sample() (*sampler, error) {
	c, err := p.cpu()
	if err != nil {
		return nil, err
	}
	s := &sampler{p: p, start: time.Now(), cpuStart: c, stopped: make(chan struct{}), result: make(chan usage, 1)}
	go func() {
		var sum, n, peak int64
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			if v, err := p.rss(); err == nil {
				sum += v
				n++
				peak = max(peak, v)
			}
			select {
			case <-s.stopped:
				u := usage{rssMax: peak}
				if n > 0 {
					u.rssAvg = sum / n
				}
				s.result <- u
				return
			case <-tick.C:
			}
		}
	}()
	return s, nil
}

func (s *sampler) done() (usage, error) {
	close(s.stopped)
	u := <-s.result
	c, err := s.p.cpu()
	if err != nil {
		return u, err
	}
	u.cpu = (c - s.cpuStart).Seconds() / time.Since(s.start).Seconds()
	return u, nil
}

// loadAverage returns the machine's 1-, 5- and 15-minute load averages and
// its CPU count, as the report prints them.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return fmt.Sprintf("%s %s %s", f[0], f[1], f[2])
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// faultAround is the kernel's default fault-around window: on a fault in a
// file mapping it maps the neighbouring pages that are in the page cache,
// up to this aligned block, so a process's RSS of its executable grows in
// whole blocks however few of their pages it runs.
const faultAround = 64 << 10

// binaryBlocks counts the fault-around blocks of the process's executable
// that hold resident pages, and how many of them are resident throughout:
// when nearly every block is full, the binary's share of RSS measures how
// widely the code that ran is spread over the executable, not how much of
// it ran. It reads /proc/<pid>/pagemap (the present bit needs no privilege).
func (p *process) binaryBlocks() (blocks, full int, err error) {
	pid := p.cmd.Process.Pid
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return 0, 0, err
	}
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return 0, 0, err
	}
	pagemap, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return 0, 0, err
	}
	defer pagemap.Close()
	const page = 4096
	resident := map[uint64]int{} // block → resident pages
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[5] != exe {
			continue
		}
		var start, end uint64
		if _, err := fmt.Sscanf(f[0], "%x-%x", &start, &end); err != nil {
			return 0, 0, fmt.Errorf("maps line %q: %w", line, err)
		}
		entries := make([]byte, (end-start)/page*8)
		if _, err := pagemap.ReadAt(entries, int64(start/page*8)); err != nil {
			return 0, 0, err
		}
		for i := range (end - start) / page {
			if binary.LittleEndian.Uint64(entries[i*8:])>>63 == 1 {
				resident[(start+i*page)/faultAround]++
			}
		}
	}
	for _, n := range resident {
		if n == faultAround/page {
			full++
		}
	}
	return len(resident), full, nil
}
