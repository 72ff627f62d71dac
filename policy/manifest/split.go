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
//
// A List written as kubectl writes one (a top-level "items:" block
// sequence) is streamed too: each item comes out on its own, de-indented,
// before the rest of its document, so that a cluster dump of gigabytes
// (kubectl get nodes,pods -A -o yaml) costs one item's worth of memory.
// Items are split by indentation alone; anchors and aliases that cross
// items, which kubectl never writes, do not survive the split.
type documents struct {
	r    *bufio.Reader
	line int // lines consumed so far
	buf  bytes.Buffer
	done bool

	// doc is the 1-based number of the document being read.
	doc int
	// started: a line or separator of the current document was read.
	started bool
	start   int // line the current document starts on

	// The streamed items of the current document: the state, the
	// indentation of the "- " of each item (-1 until the first item),
	// the item being gathered and how many were returned.
	items      itemState
	itemIndent int
	// item is the item being gathered, out the one last returned (two
	// buffers, swapped, so that returning an item copies nothing).
	item, out *bytes.Buffer
	itemLine  int
	itemCount int
	// pending is a line read but not yet handled (it ended an item).
	pending []byte
	// jsonItems is the line that opened a JSON List's items.
	jsonItems []byte
}

type itemState int

const (
	noItems itemState = iota
	inItems
	// inJSONItems: the "items" array of a JSON List written one object
	// per block, as kubectl get -o json (json.MarshalIndent) writes it.
	inJSONItems
)

// part is one document, or one streamed item of a List document.
type part struct {
	data []byte
	// line is where the document or item starts; doc is the document's
	// 1-based number.
	line, doc int
	// item is the item's 1-based position in its List, 0 for a document.
	item int
	// column is how far the item's text was de-indented (its first
	// column is column+1 in the file).
	column int
	// streamed is, for a document, how many items of it came out before
	// it (the document then holds "items: []" in their place).
	streamed int
}

func newDocuments(r io.Reader) *documents {
	return &documents{r: bufio.NewReaderSize(r, 64<<10), item: new(bytes.Buffer), out: new(bytes.Buffer)}
}

// readLine returns the next line, whole however long, and io.EOF after the
// last one.
func (d *documents) readLine() ([]byte, error) {
	if d.pending != nil {
		line := d.pending
		d.pending = nil
		return line, nil
	}
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
		if errors.Is(err, io.EOF) {
			err = nil
			d.done = true
		}
		return line, err
	}
	if err == nil {
		err = io.EOF
	}
	return nil, err
}

// next returns the next part; its bytes are valid until the following call.
// It returns io.EOF after the last document. A stream that starts with a
// separator has no empty document before it.
func (d *documents) next() (part, error) {
	if !d.started {
		if d.done && d.pending == nil {
			return part{}, io.EOF
		}
		d.begin(d.line + 1)
	}
	for {
		var line []byte
		var err error
		if d.done && d.pending == nil {
			err = io.EOF
		} else {
			line, err = d.readLine()
		}
		if errors.Is(err, io.EOF) {
			if p, ok := d.flushItem(); ok {
				return p, nil
			}
			d.done = true
			return d.end(), nil
		}
		if err != nil {
			return part{}, err
		}
		if isSeparator(line) {
			if d.line == 1 {
				d.start = 2 // a leading separator opens the first document
				continue
			}
			if p, ok := d.flushItem(); ok {
				// Read again by the next call (the reader's slice
				// does not outlive the next read).
				d.pending = append([]byte(nil), line...)
				return p, nil
			}
			p := d.end()
			d.begin(d.line + 1)
			return p, nil
		}
		if p, ok := d.takeLine(line); ok {
			return p, nil
		}
	}
}

func (d *documents) begin(start int) {
	d.doc++
	d.started = true
	d.start = start
	d.buf.Reset()
	d.items, d.itemIndent, d.itemCount = noItems, -1, 0
	d.item.Reset()
}

// end returns the document gathered so far and closes it.
func (d *documents) end() part {
	d.started = false
	return part{data: d.buf.Bytes(), line: d.start, doc: d.doc, streamed: d.itemCount}
}

// takeLine adds a line to the document or to the item being gathered; it
// returns an item when the line ends one.
func (d *documents) takeLine(line []byte) (part, bool) {
	if d.items == inJSONItems {
		return d.takeJSONLine(line)
	}
	if d.items == noItems {
		if d.buf.Len() > 0 && bytes.Equal(bytes.TrimSpace(line), []byte(`"items": [`)) &&
			bytes.Equal(bytes.TrimSpace(d.buf.Bytes()[:bytes.IndexByte(d.buf.Bytes(), '\n')+1]), []byte("{")) {
			d.items, d.itemIndent = inJSONItems, -1
			d.jsonItems = append(d.jsonItems[:0], line...)
			return part{}, false
		}
		if isItemsKey(line) {
			d.items = inItems
			d.buf.WriteString("items: []\n")
			return part{}, false
		}
		d.buf.Write(line)
		return part{}, false
	}
	indent, content := indentation(line)
	// A comment more indented than the entries may be a block scalar's
	// text: it is kept as a continuation.
	blank := len(bytes.TrimSpace(content)) == 0 || content[0] == '#' && (d.itemIndent < 0 || indent <= d.itemIndent)
	switch {
	case blank:
		if d.item.Len() > 0 {
			d.item.WriteString("\n") // keeps the lines counted
		}
		return part{}, false
	case isEntry(content) && (d.itemIndent < 0 || indent == d.itemIndent):
		d.itemIndent = indent
		p, ok := d.flushItem()
		d.itemLine = d.line
		d.item.Write(content[1:]) // the "-"; the space after it is indentation
		d.dedentFirst()
		return p, ok
	case d.itemIndent >= 0 && indent > d.itemIndent:
		cut := min(indent, d.itemIndent+2)
		d.item.Write(line[cut:])
		return part{}, false
	case d.itemIndent < 0:
		// "items:" holds no block sequence (a mapping, say): the
		// document is not streamed after all.
		d.items = noItems
		d.buf.Truncate(d.buf.Len() - len("items: []\n"))
		d.buf.WriteString("items:\n")
		d.buf.Write(line)
		return part{}, false
	}
	// Back at the List's own indentation: the items are over.
	p, ok := d.flushItem()
	d.items = noItems
	d.buf.Write(line)
	return p, ok
}

// takeJSONLine is takeLine in a JSON List's items: an item runs from a
// line "{" to the line "}" (or "},") at the same indentation.
func (d *documents) takeJSONLine(line []byte) (part, bool) {
	indent, content := indentation(line)
	trimmed := bytes.TrimSpace(content)
	open := d.item.Len() > 0
	switch {
	case open:
		d.item.Write(line)
		if indent == d.itemIndent && (bytes.Equal(trimmed, []byte("}")) || bytes.Equal(trimmed, []byte("},"))) {
			if bytes.HasSuffix(trimmed, []byte(",")) {
				b := d.item.Bytes()
				d.item.Truncate(bytes.LastIndexByte(b, ','))
			}
			return d.flushItem()
		}
	case len(trimmed) == 0:
	case bytes.Equal(trimmed, []byte("{")) && (d.itemIndent < 0 || indent == d.itemIndent):
		d.itemIndent, d.itemLine = indent, d.line
		d.item.Write(line)
	case trimmed[0] == ']':
		// The items are over: the document keeps an empty array.
		d.buf.Write(d.jsonItems[:bytes.IndexByte(d.jsonItems, '[')+1])
		d.buf.Write(bytes.TrimLeft(content, " \t"))
		d.items = noItems
	default:
		// Not one object per block: read the document whole (or, past
		// the first items, let it fail to parse rather than guess).
		d.items = noItems
		if d.itemCount == 0 {
			d.buf.Write(d.jsonItems)
		}
		d.buf.Write(line)
	}
	return part{}, false
}

// dedentFirst strips the spaces after an item's "-", so that the item's
// text starts at its first key: "- apiVersion: v1" becomes "apiVersion: v1".
func (d *documents) dedentFirst() {
	b := d.item.Bytes()
	n := 0
	for n < len(b) && b[n] == ' ' {
		n++
	}
	if n > 0 {
		d.item.Next(n)
	}
}

// flushItem returns the item being gathered, if any.
func (d *documents) flushItem() (part, bool) {
	if d.item.Len() == 0 {
		return part{}, false
	}
	d.itemCount++
	d.item, d.out = d.out, d.item
	d.item.Reset()
	column := d.itemIndent + 2 // a YAML item loses its "- " indentation
	if d.items == inJSONItems {
		column = 0 // a JSON item keeps its own
	}
	return part{data: d.out.Bytes(), line: d.itemLine, doc: d.doc, item: d.itemCount, column: column}, true
}

// isItemsKey reports whether a line is a top-level "items:" with its value
// on the following lines.
func isItemsKey(line []byte) bool {
	rest, ok := bytes.CutPrefix(line, []byte("items:"))
	if !ok {
		return false
	}
	rest = bytes.TrimSpace(rest)
	return len(rest) == 0 || rest[0] == '#'
}

// isEntry reports whether content (a line without its indentation) starts
// a block sequence entry.
func isEntry(content []byte) bool {
	return len(content) > 0 && content[0] == '-' && (len(content) == 1 || content[1] == ' ' || content[1] == '\n' || content[1] == '\r' || content[1] == '\t')
}

// indentation returns how many spaces start line and the rest of it.
func indentation(line []byte) (int, []byte) {
	n := 0
	for n < len(line) && line[n] == ' ' {
		n++
	}
	return n, line[n:]
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
