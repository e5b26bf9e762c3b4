//! todo
pub struct Uidlist; pub struct UidRecord; pub struct UidlistLock;
