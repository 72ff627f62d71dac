//go:build !offline

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// clusterFlags are kubectl's own flags for reaching a cluster (--kubeconfig,
// --context, --namespace, --as, --as-group, --token, --server,
// --request-timeout, --insecure-skip-tls-verify, ...), so that every command
// that talks to a cluster takes them as kubectl does, also as kubectl dsguard.
type clusterFlags struct {
	*genericclioptions.ConfigFlags
}

func newClusterFlags(cmd *cobra.Command) *clusterFlags {
	f := &clusterFlags{genericclioptions.NewConfigFlags(true)}
	f.AddFlags(cmd.Flags())
	_ = cmd.RegisterFlagCompletionFunc("namespace", f.completeNamespaces)
	return f
}

// client returns a controller-runtime client for the flags' cluster.
func (f *clusterFlags) client() (client.Client, error) {
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// namespace returns --namespace, else the context's namespace.
func (f *clusterFlags) namespace() (string, error) {
	ns, _, err := f.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// completeNamespaces completes --namespace from the cluster.
func (f *clusterFlags) completeNamespaces(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
	c, err := f.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var list corev1.NamespaceList
	if err := c.List(cmd.Context(), &list); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for i := range list.Items {
		if strings.HasPrefix(list.Items[i].Name, prefix) {
			out = append(out, list.Items[i].Name)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeDaemonSets completes a DaemonSet name in the flags' namespace.
func (f *clusterFlags) completeDaemonSets(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, err := f.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ns, err := f.namespace()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var list appsv1.DaemonSetList
	if err := c.List(cmd.Context(), &list, client.InNamespace(ns)); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for i := range list.Items {
		if strings.HasPrefix(list.Items[i].Name, prefix) {
			out = append(out, list.Items[i].Name)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// printerFormat reports whether -o names one of kubectl's printers (yaml,
// json, name, jsonpath=..., go-template=...), which print through cli-runtime
// exactly as kubectl does.
func printerFormat(output string) bool {
	if output == "" {
		return false
	}
	pf := genericclioptions.NewPrintFlags("")
	pf.OutputFormat = &output
	_, err := pf.ToPrinter()
	return err == nil
}

// printObject prints obj with kubectl's printer for -o output.
func printObject(w io.Writer, output string, obj runtime.Object) error {
	pf := genericclioptions.NewPrintFlags("")
	pf.OutputFormat = &output
	p, err := pf.ToPrinter()
	if err != nil {
		return err
	}
	return p.PrintObj(obj, w)
}

// toUnstructured turns a JSON document with apiVersion and kind into an
// object kubectl's printers accept.
func toUnstructured(render func(io.Writer) error) (*unstructured.Unstructured, error) {
	var buf bytes.Buffer
	if err := render(&buf); err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}
