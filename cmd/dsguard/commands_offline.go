//go:build offline

package main

import "github.com/spf13/cobra"

// clusterCommands is empty in the offline build (see commands_cluster.go).
func clusterCommands() []*cobra.Command { return nil }
