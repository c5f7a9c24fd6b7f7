// Command cdispec loads CDI spec files with the CDI library that containerd and CRI-O use
// (tags.cncf.io/container-device-interface, pkg/cdi ReadSpec) and prints, for each file
// named on its command line, one JSON line: {"path": ..., "error": ...}, the error empty
// when the library accepts the spec. gpufleet's Python judgement of CDI specs
// (plugins/module_utils/nvidia/cdi_spec.py) is compared with it by
// tests/integration/test_cdi_spec_library.py.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"tags.cncf.io/container-device-interface/pkg/cdi"
)

type verdict struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

func main() {
	enc := json.NewEncoder(os.Stdout)
	for _, path := range os.Args[1:] {
		v := verdict{Path: path}
		if _, err := cdi.ReadSpec(path, 0); err != nil {
			v.Error = err.Error()
		}
		if err := enc.Encode(v); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
}
