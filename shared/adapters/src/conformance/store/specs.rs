//! Kept specifications: the latest revision's is kept, an older or repeated one changes nothing,
//! tenants are apart, and one too large is refused.

use super::ids;
use openqq_core::{DesignStore, KeptSpec, PortError, TenantId};

fn spec(revision: u64) -> KeptSpec {
    KeptSpec { revision, submission: format!(r#"{{"spec":{{"name":"r{revision}"}}}}"#) }
}

pub async fn the_latest_revisions_spec_is_kept_and_an_older_one_changes_nothing<S: DesignStore + ?Sized>(store: &S) {
    let (t, d) = ids();
    assert_eq!(store.kept_spec(&t, &d).await.unwrap(), None, "nothing kept for a new design");
    store.keep_spec(&t, &d, &spec(2)).await.unwrap();
    assert_eq!(store.kept_spec(&t, &d).await.unwrap(), Some(spec(2)));
    store.keep_spec(&t, &d, &spec(1)).await.unwrap();
    let repeated = KeptSpec { revision: 2, submission: "{}".into() };
    store.keep_spec(&t, &d, &repeated).await.unwrap();
    assert_eq!(store.kept_spec(&t, &d).await.unwrap(), Some(spec(2)), "an older or repeated revision changes nothing");
    store.keep_spec(&t, &d, &spec(3)).await.unwrap();
    assert_eq!(store.kept_spec(&t, &d).await.unwrap(), Some(spec(3)));

    // Another tenant's design of the same id is another design.
    let other = TenantId::parse(super::unique("t")).unwrap();
    assert_eq!(store.kept_spec(&other, &d).await.unwrap(), None);
    store.keep_spec(&other, &d, &spec(1)).await.unwrap();
    assert_eq!(store.kept_spec(&t, &d).await.unwrap(), Some(spec(3)));
    assert_eq!(store.kept_spec(&other, &d).await.unwrap(), Some(spec(1)));

    let huge = KeptSpec { revision: 9, submission: "x".repeat(openqq_core::design::MAX_DESIGN_RECORD_BYTES + 1) };
    assert!(matches!(store.keep_spec(&t, &d, &huge).await, Err(PortError::Invalid { .. })));
    assert_eq!(store.kept_spec(&t, &d).await.unwrap(), Some(spec(3)), "a refused spec changes nothing");
}
