package main

import (
	"context"
	"errors"
	"flag"
	"os/signal"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dsguard/dsguard/clusterview"
)

// nodeWatcherCommand runs the harness binary as the floor of the CPU phases:
// a process that watches the Nodes as dsguard's node view does (the same
// lister-watcher, protobuf, a streamed list, no compression) and keeps
// nothing. What it costs under node churn is what any watcher of the Nodes
// pays to receive and decode them; dsguard's CPU beside it is what the node
// view adds.
const nodeWatcherCommand = "node-watcher"

func runNodeWatcher(args []string) error {
	fs := flag.NewFlagSet(nodeWatcherCommand, flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the API server")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *kubeconfig == "" {
		return errors.New("-kubeconfig is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	// As `dsguard serve` configures its node client.
	cfg.DisableCompression = true
	client, err := kubernetes.NewForConfig(clusterview.NodeClientConfig(cfg))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	toolscache.NewReflectorWithOptions(clusterview.NodeListerWatcher(client), &corev1.Node{}, discardStore{},
		toolscache.ReflectorOptions{Name: "nodes"}).RunWithContext(ctx)
	return nil
}

// discardStore is a reflector's store that keeps nothing.
type discardStore struct{}

func (discardStore) Add(any) error                        { return nil }
func (discardStore) Update(any) error                     { return nil }
func (discardStore) Delete(any) error                     { return nil }
func (discardStore) List() []any                          { return nil }
func (discardStore) ListKeys() []string                   { return nil }
func (discardStore) LastStoreSyncResourceVersion() string { return "" }
func (discardStore) Bookmark(string)                      {}
func (discardStore) Get(any) (any, bool, error)           { return nil, false, nil }
func (discardStore) GetByKey(string) (any, bool, error)   { return nil, false, nil }
func (discardStore) Replace([]any, string) error          { return nil }
func (discardStore) Resync() error                        { return nil }
