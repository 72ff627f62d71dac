package framework

import (
	"strings"

	"golang.org/x/net/html"
)

// PageGroup is one node group's row of a coverage map as the browser left
// it: its nodes and whether the page's script hid it.
type PageGroup struct {
	Nodes  []string
	Hidden bool
}

// PageGroups reads a coverage map's group rows in the page's order.
func PageGroups(dom string) ([]PageGroup, error) {
	var out []PageGroup
	err := eachElement(dom, func(n *html.Node) {
		if n.Data != "tr" || !hasClass(n, "group") {
			return
		}
		out = append(out, PageGroup{Nodes: strings.Split(Attr(n, "data-nodes"), ","), Hidden: hasClass(n, "hidden")})
	})
	return out, err
}

// PageTextByID is the text of the element with the id, "" if none.
func PageTextByID(dom, id string) (string, error) {
	var b strings.Builder
	found := false
	err := eachElement(dom, func(n *html.Node) {
		if found || Attr(n, "id") != id {
			return
		}
		found = true
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
	})
	return b.String(), err
}

// hasClass reports whether the element's class list holds class, as a
// whole word: "hidden" is not "unhidden".
func hasClass(n *html.Node, class string) bool {
	return strings.Contains(" "+Attr(n, "class")+" ", " "+class+" ")
}
