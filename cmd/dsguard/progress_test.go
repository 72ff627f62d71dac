package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestProgress(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A file is no terminal: a log gets no progress.
	p := newProgress(f)
	p.say("listed %d nodes", 5000)
	p.done()
	if st, _ := f.Stat(); st.Size() != 0 {
		t.Errorf("progress written to a file (%d bytes): want none where stderr is not a terminal", st.Size())
	}

	var b bytes.Buffer
	p = &progress{w: &b, on: true}
	p.say("listed %d nodes", 1)
	p.say("listed %d nodes", 2) // within progressEvery: not rewritten
	if got := b.String(); got != "\r\033[Klisted 1 nodes" {
		t.Errorf("first line %q", got)
	}
	p.last = time.Now().Add(-progressEvery)
	p.say("listed %d nodes", 3)
	p.done()
	p.done()
	if got := b.String(); got != "\r\033[Klisted 1 nodes\r\033[Klisted 3 nodes\r\033[K" {
		t.Errorf("lines %q: want rewritten in place and cleared once", got)
	}
	var nilProgress *progress
	nilProgress.say("no panic")
	nilProgress.done()
}
