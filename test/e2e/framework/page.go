package framework

import (
	"strings"

	"golang.org/x/net/html"
)

// PageCell is one node's cell of one DaemonSet in a coverage map, as the
// browser left the page: its state and, from the cell's title, its reason.
type PageCell struct{ Node, State, Reason string }

// ComparePageCells orders cells by node.
func ComparePageCells(a, b PageCell) int { return strings.Compare(a.Node, b.Node) }

// PageCells reads a coverage map's rendered table: each group row's nodes
// and each cell's column (data-ds), state and reason, one entry per node.
// It returns nil when the page holds no cell.
func PageCells(dom string) (map[string][]PageCell, error) {
	out := map[string][]PageCell{}
	err := eachElement(dom, func(n *html.Node) {
		if n.Data != "tr" || !strings.Contains(Attr(n, "class"), "group") {
			return
		}
		nodes := strings.Split(Attr(n, "data-nodes"), ",")
		for td := n.FirstChild; td != nil; td = td.NextSibling {
			if td.Type != html.ElementNode || td.Data != "td" {
				continue
			}
			state := Attr(td, "data-state")
			reason := ""
			if _, after, ok := strings.Cut(Attr(td, "title"), ": "+state+": "); ok {
				reason = after
			}
			for _, node := range nodes {
				out[Attr(td, "data-ds")] = append(out[Attr(td, "data-ds")], PageCell{Node: node, State: state, Reason: reason})
			}
		}
	})
	if len(out) == 0 {
		return nil, err
	}
	return out, err
}

// PageColumns reports, for each DaemonSet column of a coverage map (by its
// data-ds), whether the page's script hid it; filtered says the script ran.
func PageColumns(dom string) (hidden map[string]bool, filtered bool, err error) {
	hidden = map[string]bool{}
	err = eachElement(dom, func(n *html.Node) {
		if n.Data == "body" && Attr(n, "data-filtered") == "true" {
			filtered = true
		}
		if n.Data == "th" && Attr(n, "data-ds") != "" {
			hidden[Attr(n, "data-ds")] = strings.Contains(Attr(n, "class"), "hidden")
		}
	})
	return hidden, filtered, err
}

// PageText is the text of the first element with the class, "" if none.
func PageText(dom, class string) (string, error) {
	text, found := "", false
	err := eachElement(dom, func(n *html.Node) {
		if found || !strings.Contains(" "+Attr(n, "class")+" ", " "+class+" ") {
			return
		}
		found = true
		var b strings.Builder
		var walk func(*html.Node)
		walk = func(n *html.Node) {
			if n.Type == html.TextNode {
				b.WriteString(n.Data)
			}
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				walk(c)
			}
		}
		walk(n)
		text = b.String()
	})
	return text, err
}

func eachElement(dom string, fn func(*html.Node)) error {
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		return err
	}
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			fn(n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return nil
}

// Attr is the element's attribute key, "" when it has none.
func Attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}
