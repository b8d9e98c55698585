package natstest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"paynotify/internal/proctest"
)

// clusterReadyTimeout bounds how long a new cluster may take to elect its
// JetStream meta leader.
const clusterReadyTimeout = 30 * time.Second

// Cluster is a JetStream cluster of private nats-server processes, routed
// to each other on loopback ports. Each node can be stopped and started
// again (same ports, same store directory) to play a node lost and
// brought back.
type Cluster struct {
	Nodes []*Server
}

// StartCluster runs an n-node JetStream cluster and waits until it
// answers JetStream requests. It is killed when the test ends.
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	routePorts := make([]int, n)
	for i := range routePorts {
		routePorts[i] = proctest.FreePort(tb)
	}
	route := func(i int) string { return "nats://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(routePorts[i])) }
	c := &Cluster{}
	for i := range n {
		var routes []string
		for j := range n {
			if j != i {
				routes = append(routes, route(j))
			}
		}
		name, dir := fmt.Sprintf("n%d", i+1), tb.TempDir()
		c.Nodes = append(c.Nodes, &Server{name: name, Process: proctest.Start(tb, proctest.Spec{
			Name:   "nats-server " + name,
			Binary: Binary,
			Args: func(port int) []string {
				return []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", dir,
					"-server_name", name, "-cluster_name", "paynotify-test",
					"-cluster", route(i), "-routes", strings.Join(routes, ",")}
			},
			Ready: proctest.Dial,
		})})
	}
	c.waitReady(tb)
	return c
}

// URL lists every node, separated by commas, as NATS_URL takes it.
func (c *Cluster) URL() string {
	urls := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		urls[i] = s.URL()
	}
	return strings.Join(urls, ",")
}

// Node is the node named name (n1, n2, ...), as stream and consumer infos
// name their leaders and replicas.
func (c *Cluster) Node(tb testing.TB, name string) *Server {
	tb.Helper()
	for _, s := range c.Nodes {
		if s.name == name {
			return s
		}
	}
	tb.Fatalf("natstest: no node %q in the cluster", name)
	return nil
}

// waitReady polls until the cluster has a JetStream meta leader: until
// then, creating a stream fails.
func (c *Cluster) waitReady(tb testing.TB) {
	tb.Helper()
	nc, err := nats.Connect(c.URL(), nats.Timeout(2*time.Second))
	if err != nil {
		tb.Fatalf("natstest: connect to the cluster: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatalf("natstest: %v", err)
	}
	deadline := time.Now().Add(clusterReadyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("natstest: the cluster answers no JetStream request after %v: %v", clusterReadyTimeout, err)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}
