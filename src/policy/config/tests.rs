//! Policy text: what parses, what is refused and with which reason.

use super::*;

#[test]
fn durations_print_in_the_style_they_parse_in() {
    for (d, text) in [
        (Duration::ZERO, "0s"),
        (Duration::from_millis(500), "500ms"),
        (Duration::from_secs(61), "1m1s"),
        (Duration::from_secs(5400), "1h30m"),
        (Duration::from_secs(8 * 86_400), "8d"),
        (Duration::from_secs(8 * 86_400 + 3601), "8d1h1s"),
        (Duration::new(2, 1_500), "2s1us500ns"),
    ] {
        assert_eq!(show(d), text);
        assert_eq!(duration::parse(text).unwrap(), d, "{text} parses back");
    }
}

#[test]
fn empty_policy_is_the_default() {
    assert_eq!(Policy::parse("").unwrap(), Policy::default());
    assert_eq!(Policy::parse("{}").unwrap(), Policy::default());
    // Sections with no keys, and stray document markers, mean the defaults too.
    for text in ["drain:\n", "drain:\n#  action: warn\nreplicas:\ngate: null\n", "---\n", "drain: {}\n---\n"]
    {
        assert_eq!(Policy::parse(text).unwrap(), Policy::default(), "{text:?}");
    }
    let p = Policy::parse("---\ndrain:\n  action: warn\n---\n").unwrap();
    assert_eq!(p.drain.action, DrainAction::Warn);
}

#[test]
fn unclear_policy_text_gets_a_clear_reason() {
    for (text, why) in [
        ("drain: {}\n---\nreplicas: {}\n", "holds 2 YAML documents; a policy file is one document"),
        ("drain:\n  stallAfter: 0.5\n", "whole seconds only (write a unit for less, e.g. \"500ms\")"),
        ("drain:\n  stallAfter: 99999999999999999999\n", "too large (use e.g. 90s, 10m, 1h)"),
        ("drain:\n  stallAfter: -5\n", "a duration cannot be negative"),
        ("drain:\n  stallAfter: [1]\n", "expected a duration such as \"90s\""),
        ("drain:\n  stallAfter: ten\n", "invalid duration \"ten\""),
    ] {
        let e = Policy::parse(text).unwrap_err();
        assert!(e.contains(why), "{text:?}: {e}");
    }
}

#[test]
fn every_key_parses() {
    let p = Policy::parse(
        "drain:\n  action: warn\n  denyCode: 403\n  protectStoppedReplicas: false\n  stallAfter: 15m\n  maxViewAge: 2s\n  reuseCurrentKinds: true\n  maxListedVolumes: 3\n\
         replicas:\n  minimum: 2\n  action: deny\n  namespaceMinimums: {prod: 3}\n  storageClassMinimums: {longhorn-scratch: 1}\n\
         gate:\n  enabled: true\n  image: example/lg:1\n  timeout: 90s\n",
    )
    .unwrap();
    assert_eq!(p.drain.action, DrainAction::Warn);
    assert_eq!(p.drain.deny_code, 403);
    assert_eq!(p.drain.stall_after, Duration::from_secs(900));
    assert_eq!(p.drain.max_view_age, Duration::from_secs(2));
    assert!(p.drain.reuse_current_kinds && !Policy::default().drain.reuse_current_kinds);
    assert_eq!(p.replicas.action, ReplicaAction::Deny);
    assert_eq!(p.replicas.namespace_minimums["prod"], 3);
    assert_eq!(p.gate.timeout, Duration::from_secs(90));
}

#[test]
fn the_upper_bounds_themselves_are_accepted() {
    let p = Policy::parse("drain:\n  maxViewAge: 60s\n  stallAfter: 7d\ngate:\n  timeout: 1h\n").unwrap();
    assert_eq!(p.drain.max_view_age, MAX_VIEW_AGE);
    assert_eq!(p.drain.stall_after, MAX_STALL_AFTER);
    assert_eq!(p.gate.timeout, MAX_GATE_TIMEOUT);
}

#[test]
fn a_minimums_map_with_every_entry_commented_out_means_none() {
    let p =
        Policy::parse("replicas:\n  namespaceMinimums:\n  #  prod: 3\n  storageClassMinimums:\n").unwrap();
    assert!(p.replicas.namespace_minimums.is_empty() && p.replicas.storage_class_minimums.is_empty());
}

#[test]
fn trusted_users_are_exact_names_defaulting_to_longhorns_and_the_controllers() {
    let d = Policy::default();
    assert_eq!(d.drain.trusted_users, DEFAULT_TRUSTED_USERS);
    assert!(d.drain.trusts("system:serviceaccount:longhorn-system:longhorn-service-account"));
    // Exact names: no group, no prefix, no other namespace's account of the same name.
    for other in [
        "system:serviceaccounts:kube-system",
        "kubernetes-admin",
        "system:serviceaccount:kube-system:node-controller2",
    ] {
        assert!(!d.drain.trusts(other), "{other}");
    }
    let p = Policy::parse("drain:\n  trustedUsers: [system:serviceaccount:ops:cleaner]\n").unwrap();
    assert_eq!(p.drain.trusted_users, ["system:serviceaccount:ops:cleaner"]);
    assert!(!p.drain.trusts("system:serviceaccount:kube-system:generic-garbage-collector"));
    // The key with its entries commented out trusts nobody, as `[]` does.
    for text in ["drain:\n  trustedUsers:\n  # - x\n", "drain:\n  trustedUsers: []\n"] {
        assert!(Policy::parse(text).unwrap().drain.trusted_users.is_empty(), "{text:?}");
    }
}

#[test]
fn unknown_fields_and_bad_values_are_errors() {
    for (text, want) in [
        ("drain:\n  acton: warn\n", "unknown field"),
        ("bogus: 1\n", "unknown field"),
        ("drain:\n  action: maybe\n", "unknown variant"),
        ("drain:\n  denyCode: 200\n", "denyCode must be 400..599"),
        ("replicas:\n  minimum: 0\n", "replicas.minimum must be 1..20"),
        ("gate:\n  timeout: soon\n", "invalid duration"),
        ("gate:\n  timeout: 2h\n", "gate.timeout must be at most 1h, got 2h"),
        ("gate:\n  timeout: 18446744073709551615\n", "gate.timeout must be at most 1h"),
        ("drain:\n  maxViewAge: 61s\n", "drain.maxViewAge must be at most 60s, got 1m1s"),
        ("drain:\n  stallAfter: 8d\n", "drain.stallAfter must be at most 7d, got 8d"),
        ("drain:\n  stallAfter: 8d1h\n", "drain.stallAfter must be at most 7d, got 8d1h"),
        (
            "replicas:\n  storageClassMinimums: {x: -1}\n",
            "replicas.storageClassMinimums.x must be 1..20 (Longhorn's replica range), got -1",
        ),
        ("replicas:\n  namespaceMinimums: {prod: 0}\n", "replicas.namespaceMinimums.prod must be 1..20"),
        (
            "drain:\n  trustedUsers: [\"system:serviceaccount:kube-system:*\"]\n",
            "one exact username (no blanks, no wildcards)",
        ),
        ("drain:\n  trustedUsers: [\" admin\"]\n", "drain.trustedUsers holds \" admin\""),
        ("drain:\n  trustedUsers: [\"\"]\n", "drain.trustedUsers holds \"\""),
        ("drain:\n  trustedUsers: admin\n", "expected sequence"),
    ] {
        let err = Policy::parse(text).unwrap_err();
        assert!(err.contains(want), "{text:?}: {err}");
    }
}
