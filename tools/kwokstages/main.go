// Command kwokstages prints KWOK's own default Stage documents (node init, node
// heartbeat with lease, pod ready/complete/delete) at the pinned KWOK version.
// KWOK v0.8.0 no longer falls back to built-in stages, so the sandbox writes
// this output to a --config file rather than keeping a hand-copied YAML.
package main

import (
	"fmt"
	"strings"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	heartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

func main() {
	docs := []string{
		nodefast.DefaultNodeInit,
		heartbeat.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}
	for i := range docs {
		docs[i] = strings.TrimSpace(docs[i])
	}
	fmt.Println(strings.Join(docs, "\n---\n"))
}
