// gpufleet's stand-in for sigs.k8s.io/iptables-wrappers, which the Go module proxy serves
// at no version; see README.md for what it implements and what it leaves out.
module sigs.k8s.io/iptables-wrappers

go 1.24.0

require k8s.io/klog/v2 v2.140.0

require github.com/go-logr/logr v1.4.1 // indirect
