package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	commonversion "github.com/prometheus/common/version"
	"github.com/spf13/cobra"

	"github.com/dsguard/dsguard/render"
)

// version is stamped at release time with -ldflags "-X main.version=...";
// without it the module version and VCS data that Go records in every
// binary (go install module@version, go build in a checkout) are used.
var version = ""

// versionString is dsguard's version for people and for SARIF: the stamped
// version, else the module version from the build info, plus the commit.
func versionString() string {
	v, commit, modified := version, "", false
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			// The module version is the tag (v1.2.3); a release says
			// 1.2.3, as the chart and the image do.
			v = strings.TrimPrefix(info.Main.Version, "v")
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "dev"
	}
	if commit != "" && v == "dev" {
		if len(commit) > 12 {
			commit = commit[:12]
		}
		v += "+" + commit
		if modified {
			v += ".dirty"
		}
	}
	return v
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the dsguard version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			build := ""
			if !render.ChartsRendered {
				build = ", without Helm chart rendering"
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "dsguard %s (%s, %s/%s%s)\n", versionString(), runtime.Version(), runtime.GOOS, runtime.GOARCH,
				build)
			return err
		},
	}
}

// buildInfo is dsguard_build_info: always 1, its labels say which build
// runs (version as dsguard version prints it, revision, goversion, goos,
// goarch and the build tags: "norender" marks the image's build), so that
// dashboards and alerts can tell replicas of two builds apart during a
// rollout. It is client_golang's version collector, the series Prometheus
// exporters share, given dsguard's version.
func buildInfo() prometheus.Collector {
	commonversion.Version = versionString()
	return versioncollector.NewCollector("dsguard")
}
