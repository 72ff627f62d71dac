// Package fit predicts what kube-scheduler v1.37.2 does with a DaemonSet's
// Pod on one node: whether it fits, fits only by preempting lower-priority
// Pods, does not fit for now, or can never fit there.
//
// The DaemonSet controller pins each Pod it creates to its node (required
// node affinity on the field metadata.name), so the scheduler only ever
// weighs that one node, and so does this package. It follows the filter
// plugins that can turn a node agent away on a node the DaemonSet covers,
// in the order the default profile runs them:
//
//   - NodePorts: host ports (port, protocol, host IP, with 0.0.0.0 the
//     wildcard) already taken on the node;
//   - NodeResourcesFit: the pods limit, cpu, memory, ephemeral-storage and
//     every scalar resource (extended resources, hugepages), the request
//     counted as the scheduler counts it (resourcehelper.PodRequests: the
//     largest init container, restartable init containers summed, overhead,
//     pod-level resources);
//   - InterPodAffinity, required anti-affinity terms only, both ways: the
//     incoming Pod's terms against the Pods already there, and the terms of
//     the Pods already there against the incoming Pod;
//
// and then DefaultPreemption on that node: remove every Pod of lower
// priority, check the fit, and reprieve as many as still allow it, most
// important first (priority, then earliest start), as selectVictimsOnNode
// does; never with preemptionPolicy Never.
//
// Pods are not held: a Node carries compact records of the Pods bound to it
// (requests, priority, start time, host ports, labels and required
// anti-affinity terms), built by Aggregate, and its request sums per
// priority band.
//
// Not modelled: PodDisruptionBudgets (DefaultPreemption reprieves Pods whose
// eviction would break one first; here no Pod is protected), required pod
// affinity, topology spread, volumes and their limits, dynamic resource
// allocation, and scheduler profiles other than the default.
package fit
