// Command pause is the sandbox container of a Pod on the test node: it holds
// the Pod's namespaces and does nothing else. It is what the kubelet's pause
// image does, built here so that no image is ever pulled: it sleeps until
// SIGINT or SIGTERM, and as PID 1 of a Pod that shares its process namespace
// it reaps the orphans that are handed to it.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 8)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
