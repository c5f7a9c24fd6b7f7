// Command pause is the lab's pod sandbox process: it holds a pod's namespaces open,
// reaps the zombies that become its children, and exits on SIGINT or SIGTERM.
// It does what Kubernetes' build/pause/linux/pause.c does, in Go, so the lab's
// pause image is built from the Go toolchain like every other lab binary.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		os.Stdout.WriteString("pause (gpufleet lab)\n")
		return
	}
	if os.Getpid() != 1 {
		os.Stderr.WriteString("Warning: pause should be the first process\n")
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		switch s {
		case syscall.SIGCHLD:
			for {
				var ws syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		default:
			os.Stderr.WriteString("Shutting down, got signal\n")
			os.Exit(0)
		}
	}
}
