// Command cdiprobe reports what a container was given: the NVIDIA device nodes under
// /dev, the NVIDIA_* and GPUFLEET_* variables of its environment, and where each path
// named on its command line points (the links a CDI createContainer hook made). One
// line each, sorted, on standard output:
//
//	device /dev/nvidia0 c 195:0
//	env NVIDIA_VISIBLE_DEVICES=void
//	link /run/x -> /dev/nvidia0
//	missing /run/y
//
// The molecule scenario of the nvidia_container_toolkit role runs it in containers that
// containerd starts, to show what the runtime and CDI injected.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

func main() {
	var lines []string
	nodes, _ := filepath.Glob("/dev/nvidia*")
	for _, path := range nodes {
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil {
			lines = append(lines, "unreadable "+path+" "+err.Error())
			continue
		}
		kind := "other"
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFCHR:
			kind = "c"
		case syscall.S_IFBLK:
			kind = "b"
		}
		major, minor := (st.Rdev>>8)&0xfff, (st.Rdev&0xff)|((st.Rdev>>12)&0xfff00)
		lines = append(lines, fmt.Sprintf("device %s %s %d:%d", path, kind, major, minor))
	}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "NVIDIA_") || strings.HasPrefix(kv, "GPUFLEET_") {
			lines = append(lines, "env "+kv)
		}
	}
	for _, path := range os.Args[1:] {
		if target, err := os.Readlink(path); err == nil {
			lines = append(lines, "link "+path+" -> "+target)
		} else {
			lines = append(lines, "missing "+path)
		}
	}
	sort.Strings(lines)
	fmt.Println(strings.Join(lines, "\n"))
}
