package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// documents splits a YAML stream into its documents one at a time, so a
// reader never holds more than the document at hand. Unlike
// k8s.io/apimachinery's YAMLReader it keeps empty documents in the count and
// knows the line each document starts on, which is what a code-scanning tool
// needs to point at a field.
type documents struct {
	r    *bufio.Reader
	line int // lines consumed so far
	buf  bytes.Buffer
	done bool
}

func newDocuments(r io.Reader) *documents {
	return &documents{r: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next document and the 1-based line of its first line; the
// bytes are valid until the following call. It returns io.EOF after the last
// document. A stream that starts with a separator has no empty document
// before it.
func (d *documents) next() ([]byte, int, error) {
	if d.done {
		return nil, 0, io.EOF
	}
	d.buf.Reset()
	start := d.line + 1
	for {
		line, err := d.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gather it whole.
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = d.r.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if len(line) > 0 {
			d.line++
			if isSeparator(line) {
				if d.line == 1 {
					start = 2 // a leading separator opens the first document
					continue
				}
				return d.buf.Bytes(), start, nil
			}
			d.buf.Write(line)
		}
		if errors.Is(err, io.EOF) {
			d.done = true
			return d.buf.Bytes(), start, nil
		}
		if err != nil {
			return nil, start, err
		}
	}
}

// isSeparator reports whether a line is a YAML document marker "---",
// possibly followed by a comment or content after a space.
func isSeparator(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("---")) {
		return false
	}
	rest := line[3:]
	return len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\n' || rest[0] == '\r'
}
