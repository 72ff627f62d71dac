package check

import (
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/dsguard/dsguard/policy"
)

// SARIF 2.1.0 identifiers, as GitHub code scanning expects them.
const (
	sarifVersion = "2.1.0"
	sarifSchema  = "https://json.schemastore.org/sarif-2.1.0.json"
	// rulesDoc is where each rule's documentation lives, at a git ref; a
	// rule's anchor is its ID.
	rulesDoc = "https://github.com/dsguard/dsguard/blob/%s/docs/rules.md"
)

// release is a release's version, with or without the tag's "v"; between
// tags, git describe's form (1.2.3-4-gabc1234, -dirty) is no release.
var (
	release  = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)
	describe = regexp.MustCompile(`-[0-9]+-g[0-9a-f]+|dirty`)
)

// rulesDocURI is the rules' documentation as the version writing the
// report has it: a release links its own tag, so that a report read a year
// later explains the rules it applied; any other build links main.
func rulesDocURI(version string) string {
	if release.MatchString(version) && !describe.MatchString(version) {
		return fmt.Sprintf(rulesDoc, "v"+strings.TrimPrefix(version, "v"))
	}
	return fmt.Sprintf(rulesDoc, "main")
}

// Tool describes the program writing a machine-readable report.
type Tool struct {
	// Version is dsguard's version.
	Version string
	// Rules is the catalogue, for SARIF's rule metadata.
	Rules []*policy.Rule
}

type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

// sarifRun is the log's one run; Results is written result by result
// (streamMarker in the skeleton), so the invocation, whose notifications are
// known only at the end, follows the results.
type sarifRun struct {
	Tool        sarifTool         `json:"tool"`
	Results     any               `json:"results"`
	ColumnKind  string            `json:"columnKind"`
	Invocations []sarifInvocation `json:"invocations"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	Version        string      `json:"version,omitempty"`
	InformationURI string      `json:"informationUri"`
	Rules          []sarifRule `json:"rules"`
}

type sarifRule struct {
	ID                   string              `json:"id"`
	Name                 string              `json:"name"`
	ShortDescription     sarifText           `json:"shortDescription"`
	FullDescription      sarifText           `json:"fullDescription"`
	Help                 sarifText           `json:"help"`
	HelpURI              string              `json:"helpUri"`
	DefaultConfiguration sarifRuleConfig     `json:"defaultConfiguration"`
	Properties           map[string][]string `json:"properties,omitempty"`
}

type sarifRuleConfig struct {
	Level string `json:"level"`
}

type sarifText struct {
	Text string `json:"text"`
}

type sarifInvocation struct {
	ExecutionSuccessful bool                `json:"executionSuccessful"`
	Notifications       []sarifNotification `json:"toolExecutionNotifications"`
}

type sarifNotification struct {
	Level     string          `json:"level"`
	Message   sarifText       `json:"message"`
	Locations []sarifLocation `json:"locations,omitempty"`
}

type sarifResult struct {
	RuleID    string          `json:"ruleId"`
	RuleIndex *int            `json:"ruleIndex,omitempty"`
	Level     string          `json:"level"`
	Message   sarifText       `json:"message"`
	Locations []sarifLocation `json:"locations"`
	// PartialFingerprints lets code scanning follow a finding across
	// commits that move lines.
	PartialFingerprints map[string]string `json:"partialFingerprints"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysical  `json:"physicalLocation"`
	LogicalLocations []sarifLogical `json:"logicalLocations,omitempty"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           *sarifRegion  `json:"region,omitempty"`
}

type sarifArtifact struct {
	URI string `json:"uri"`
}

type sarifRegion struct {
	StartLine   int `json:"startLine"`
	StartColumn int `json:"startColumn,omitempty"`
}

type sarifLogical struct {
	FullyQualifiedName string `json:"fullyQualifiedName"`
	Kind               string `json:"kind"`
}

// sarifLevel maps an action to a SARIF level: deny is an error, warn a
// warning, audit a note.
func sarifLevel(a policy.Action) string {
	switch a {
	case policy.ActionDeny:
		return "error"
	case policy.ActionWarn:
		return "warning"
	}
	return "note"
}

// WriteSARIF renders the report as a SARIF 2.1.0 log for code scanning: one
// result per finding (audit level as notes), at the file, line and column of
// the offending field; unreadable documents as tool notifications.
func WriteSARIF(w io.Writer, r *Results, tool Tool) error {
	return writeAll(NewSARIFWriter(w, tool), r)
}

// NewSARIFWriter returns a Writer of WriteSARIF's log that writes the tool
// and its rules (from the catalogue) first, then each finding as it comes,
// then the invocation with its notifications.
func NewSARIFWriter(w io.Writer, tool Tool) Writer {
	s := &sarifWriter{out: jsonStream{w: w}, ruleIndex: map[string]int{},
		driver: sarifDriver{Name: "dsguard", Version: tool.Version, InformationURI: "https://github.com/dsguard/dsguard",
			Rules: []sarifRule{}}}
	doc := rulesDocURI(tool.Version)
	for i, rule := range tool.Rules {
		s.ruleIndex[rule.ID] = i
		s.driver.Rules = append(s.driver.Rules, sarifRule{
			ID: rule.ID, Name: rule.ID,
			ShortDescription:     sarifText{Text: rule.Title},
			FullDescription:      sarifText{Text: rule.Why},
			Help:                 sarifText{Text: rule.Remediation},
			HelpURI:              doc + "#" + rule.ID,
			DefaultConfiguration: sarifRuleConfig{Level: sarifLevel(rule.DefaultAction)},
			Properties:           map[string][]string{"tags": {"kubernetes", "daemonset"}},
		})
	}
	return s
}

type sarifWriter struct {
	out       jsonStream
	driver    sarifDriver
	ruleIndex map[string]int
}

func (s *sarifWriter) skeleton(inv sarifInvocation) *sarifLog {
	return &sarifLog{Schema: sarifSchema, Version: sarifVersion, Runs: []sarifRun{{
		Tool: sarifTool{Driver: s.driver}, Results: streamMarker, ColumnKind: "unicodeCodePoints",
		Invocations: []sarifInvocation{inv},
	}}}
}

func (s *sarifWriter) Result(res *Result) error {
	for j, f := range res.Findings {
		loc := sarifLocation{
			PhysicalLocation: sarifPhysical{ArtifactLocation: sarifArtifact{URI: sarifURI(res.Location.File)}},
			LogicalLocations: []sarifLogical{{FullyQualifiedName: res.Namespace + "/" + res.Name + fieldSuffix(f), Kind: "object"}},
		}
		if j < len(res.Positions) && res.Positions[j].Line > 0 {
			loc.PhysicalLocation.Region = &sarifRegion{StartLine: res.Positions[j].Line, StartColumn: res.Positions[j].Column}
		}
		out := sarifResult{
			RuleID: f.RuleID, Level: sarifLevel(f.Action),
			Message:   sarifText{Text: findingText(res, f)},
			Locations: []sarifLocation{loc},
			PartialFingerprints: map[string]string{
				"dsguardFinding/v1": strings.Join([]string{res.Location.File, res.Namespace, res.Name, f.RuleID, f.FieldString()}, "|"),
			},
		}
		if idx, ok := s.ruleIndex[f.RuleID]; ok {
			out.RuleIndex = &idx
		}
		if err := s.out.element(s.skeleton(sarifInvocation{}), out); err != nil {
			return err
		}
	}
	return nil
}

func (s *sarifWriter) Finish(r *Results) error {
	inv := sarifInvocation{ExecutionSuccessful: len(r.Errors) == 0 && r.Stopped == nil, Notifications: []sarifNotification{}}
	for _, e := range r.Errors {
		n := sarifNotification{Level: "error", Message: sarifText{Text: e.Error()}}
		if e.Location.File != "-" {
			n.Locations = []sarifLocation{{PhysicalLocation: sarifPhysical{ArtifactLocation: sarifArtifact{URI: sarifURI(e.Location.File)}}}}
			if e.Location.Line > 0 {
				n.Locations[0].PhysicalLocation.Region = &sarifRegion{StartLine: e.Location.Line}
			}
		}
		inv.Notifications = append(inv.Notifications, n)
	}
	if r.Stopped != nil {
		inv.Notifications = append(inv.Notifications, sarifNotification{Level: "error",
			Message: sarifText{Text: r.stoppedMessage()}})
	}
	for _, note := range r.Notes {
		inv.Notifications = append(inv.Notifications, sarifNotification{Level: "note", Message: sarifText{Text: note}})
	}
	return s.out.finish(s.skeleton(inv))
}

// sarifURI is a path relative to the repository root, with forward slashes,
// as code scanning matches it against the checkout.
func sarifURI(file string) string {
	if file == "-" {
		return "stdin"
	}
	return filepath.ToSlash(filepath.Clean(file))
}

func fieldSuffix(f policy.Finding) string {
	if s := f.FieldString(); s != "" {
		return "." + s
	}
	return ""
}

// findingText is a finding in one paragraph: what, where, the details and the fix.
func findingText(res *Result, f policy.Finding) string {
	var b strings.Builder
	b.WriteString("DaemonSet " + res.Namespace + "/" + res.Name + ": " + f.Message)
	if field := f.FieldString(); field != "" {
		b.WriteString(" (" + field + ")")
	}
	if res.Location.RenderedBy != "" {
		b.WriteString(" [in the output rendered by " + res.Location.RenderedBy + "]")
	}
	for _, d := range f.Details {
		b.WriteString("; " + d)
	}
	if f.Remediation != "" {
		b.WriteString(". Fix: " + f.Remediation)
	}
	if f.Exempted != "" {
		b.WriteString(". Exempted: " + f.Exempted)
	}
	return b.String()
}
