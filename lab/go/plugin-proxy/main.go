// Command plugin-proxy stands in for the proxy mode of csi-driver-host-path's
// hostpathplugin (`hostpathplugin --endpoint=SOCKET --proxy-endpoint=tcp://:PORT`), which
// Kubernetes' DRA e2e suite execs in the pods of its dra-test-driver-proxy ReplicaSet
// (test/e2e/dra/utils/deploy.go): the kubelet-plugin code runs inside the e2e process,
// and this program carries the kubelet's connections to it.
//
// It listens on the unix socket SOCKET (on the node, where the kubelet dials the plugin)
// and on the TCP port PORT (which the e2e process reaches through the API server's pod
// port-forwarding, test/e2e/storage/drivers/proxy). The e2e side opens TCP connections
// ahead of time and treats each as a client of its gRPC server; every connection
// accepted on SOCKET is joined to the oldest open TCP connection and bytes are copied
// both ways until either side closes, which closes the other.
//
// The image that carries it is built by gpufleet/lab/e2e_images.py, named after
// registry.k8s.io/sig-storage/hostpathplugin as the suite expects.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strings"
	"sync"
)

func main() {
	endpoint := flag.String("endpoint", "", "unix socket to listen on (a path or unix://path)")
	proxyEndpoint := flag.String("proxy-endpoint", "", "TCP address the remote side connects to (tcp://:PORT)")
	verbosity := flag.Int("v", 0, "log verbosity (connections are logged at 2 and above)")
	flag.Parse()
	if *endpoint == "" || *proxyEndpoint == "" {
		fmt.Fprintln(os.Stderr, "plugin-proxy: --endpoint and --proxy-endpoint are required; only the proxy mode of hostpathplugin is implemented")
		os.Exit(2)
	}
	socket := strings.TrimPrefix(*endpoint, "unix://")
	tcpAddr, ok := strings.CutPrefix(*proxyEndpoint, "tcp://")
	if !ok {
		log.Fatalf("--proxy-endpoint=%s: only tcp://HOST:PORT is supported", *proxyEndpoint)
	}
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		log.Fatalf("remove stale socket %s: %v", socket, err)
	}
	unixListener, err := net.Listen("unix", socket)
	if err != nil {
		log.Fatalf("listen on %s: %v", socket, err)
	}
	defer unixListener.Close()
	tcpListener, err := net.Listen("tcp", tcpAddr)
	if err != nil {
		log.Fatalf("listen on %s: %v", tcpAddr, err)
	}
	defer tcpListener.Close()
	log.Printf("proxying %s to connections on %s", socket, tcpListener.Addr())

	remotes := make(chan net.Conn, 64)
	go func() {
		for {
			conn, err := tcpListener.Accept()
			if err != nil {
				log.Fatalf("accept on %s: %v", tcpAddr, err)
			}
			if *verbosity >= 2 {
				log.Printf("remote connection from %s", conn.RemoteAddr())
			}
			remotes <- conn
		}
	}()
	for {
		local, err := unixListener.Accept()
		if err != nil {
			log.Fatalf("accept on %s: %v", socket, err)
		}
		remote := <-remotes
		if *verbosity >= 2 {
			log.Printf("joined a connection on %s to %s", socket, remote.RemoteAddr())
		}
		go join(local, remote)
	}
}

// join copies bytes both ways between a and b; when either direction ends both are closed.
func join(a, b net.Conn) {
	var once sync.Once
	closeBoth := func() {
		a.Close()
		b.Close()
	}
	go func() {
		_, _ = io.Copy(a, b)
		once.Do(closeBoth)
	}()
	_, _ = io.Copy(b, a)
	once.Do(closeBoth)
}
