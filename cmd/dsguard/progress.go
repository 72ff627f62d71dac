package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"
)

// progress says on a terminal what a long command is doing (listing a
// large cluster, investigating gaps node by node), on one line it rewrites
// at most twice a second and clears when done. Where stderr is not a
// terminal (a CI log, a pipe) it says nothing, so that logs hold results,
// not progress.
type progress struct {
	w    io.Writer
	on   bool
	last time.Time
	// shown is set while a line is on the screen.
	shown bool
}

// progressEvery is how often the line is rewritten at most.
const progressEvery = 500 * time.Millisecond

func newProgress(f *os.File) *progress {
	return &progress{w: f, on: term.IsTerminal(int(f.Fd()))}
}

// say rewrites the line, unless it was rewritten less than progressEvery ago.
func (p *progress) say(format string, args ...any) {
	if p == nil || !p.on || time.Since(p.last) < progressEvery {
		return
	}
	p.last = time.Now()
	p.shown = true
	fmt.Fprintf(p.w, "\r\033[K"+format, args...)
}

// done clears the line.
func (p *progress) done() {
	if p == nil || !p.shown {
		return
	}
	p.shown = false
	fmt.Fprint(p.w, "\r\033[K")
}
