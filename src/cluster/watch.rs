//! Filling the cluster view from live watches (kube reflectors).
