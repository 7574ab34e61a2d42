//! Crash points enumerated, not sampled. [`SimStorage`] is a file system in memory that records every write,
//! sync, truncation, rename, removal and directory sync the index makes, and can crash after any one of them
//! or fail any one of them. A crash keeps what was synced, plus what the unsynced state allows: any prefix of
//! a file's unsynced appended bytes (or its unsynced truncation, or not), and each unsynced directory
//! operation present or absent. The tests run one workload (groups, deletions, two snapshots, a rotation) once
//! per crash point and per failure point, recover every state the crash allows, and check the promises of the
//! guide's Durability section against a model of the acknowledged writes.
//!
//! `LSHBENCH_CRASH_FULL=1` runs the full enumeration (every prefix of unsynced bytes, every subset of unsynced
//! directory operations, every flipped byte); without it, a quick form for CI visits a few of each.

use super::storage::{Storage, StorageFile};
use super::*;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

/// How the simulation fails an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fail {
    /// EIO: nothing of a failed write is appended.
    Eio,
    /// ENOSPC: a failed write appends half of its bytes first.
    NoSpace,
}

impl Fail {
    fn error(self) -> io::Error {
        match self {
            Fail::Eio => io::Error::from_raw_os_error(5),
            Fail::NoSpace => io::Error::from_raw_os_error(28),
        }
    }
}

/// Which operation crashes the machine, or fails.
#[derive(Clone, Copy, Debug, Default)]
pub struct Plan {
    /// The machine stops right after this operation (counted from 0): every later one fails and changes
    /// nothing.
    pub crash_after: Option<usize>,
    /// This operation fails and changes nothing (a write: see [`Fail`]); later ones go on.
    pub fail_at: Option<(usize, Fail)>,
}

#[derive(Clone, Debug, Default)]
struct Inode {
    data: Vec<u8>,
    /// What a crash keeps for sure.
    synced: Vec<u8>,
}

/// A directory operation not yet made durable by a directory sync.
#[derive(Clone, Debug)]
enum DirOp {
    Link(PathBuf, usize),
    Rename(PathBuf, PathBuf, usize),
    Unlink(PathBuf),
}

#[derive(Default)]
struct Sim {
    inodes: Vec<Inode>,
    names: BTreeMap<PathBuf, usize>,
    /// The names a crash keeps for sure.
    durable: BTreeMap<PathBuf, usize>,
    /// Directory operations since the last directory sync, in order.
    pending: Vec<DirOp>,
    /// Every operation counted so far, described.
    ops: Vec<String>,
    plan: Plan,
    crashed: bool,
    /// Writes past this many bytes of live files fail with ENOSPC (the part that fits is written).
    capacity: Option<u64>,
    /// Writes to a file no name leads to any more: lost at the next restart.
    orphan_writes: Vec<String>,
}

impl Sim {
    fn used(&self) -> u64 {
        let live: BTreeSet<usize> = self.names.values().copied().collect();
        live.iter().map(|&i| self.inodes[i].data.len() as u64).sum()
    }
}

/// One state a crash may leave: file names and contents.
pub type Image = BTreeMap<PathBuf, Vec<u8>>;

/// The simulated file system. Cheap to clone (a shared handle).
#[derive(Clone, Default)]
pub struct SimStorage(Arc<Mutex<Sim>>);

impl SimStorage {
    /// An empty file system that runs `plan`.
    pub fn new(plan: Plan) -> SimStorage {
        let s = SimStorage::default();
        s.0.lock().unwrap().plan = plan;
        s
    }

    /// A file system holding `image`, all of it durable.
    pub fn from_image(image: &Image) -> SimStorage {
        let s = SimStorage::default();
        {
            let mut sim = s.0.lock().unwrap();
            for (path, data) in image {
                let ino = sim.inodes.len();
                sim.inodes.push(Inode {
                    data: data.clone(),
                    synced: data.clone(),
                });
                sim.names.insert(path.clone(), ino);
                sim.durable.insert(path.clone(), ino);
            }
        }
        s
    }

    /// Every operation counted so far, described.
    pub fn ops(&self) -> Vec<String> {
        self.0.lock().unwrap().ops.clone()
    }

    /// The same file system, running `plan` from now on.
    pub fn with_plan(self, plan: Plan) -> SimStorage {
        self.0.lock().unwrap().plan = plan;
        self
    }

    /// Sets the capacity of the disk (`None`: unlimited).
    pub fn set_capacity(&self, bytes: Option<u64>) {
        self.0.lock().unwrap().capacity = bytes;
    }

    /// Bytes of the files that names lead to.
    pub fn used(&self) -> u64 {
        self.0.lock().unwrap().used()
    }

    /// The writes made to files that no name leads to any more.
    pub fn orphan_writes(&self) -> Vec<String> {
        self.0.lock().unwrap().orphan_writes.clone()
    }

    /// The files and contents visible now, as if everything were synced (a clean shutdown).
    pub fn image(&self) -> Image {
        let sim = self.0.lock().unwrap();
        sim.names
            .iter()
            .map(|(p, &i)| (p.clone(), sim.inodes[i].data.clone()))
            .collect()
    }

    /// The states a crash now may leave (see the module's documentation); `full` enumerates every prefix and
    /// every subset, the quick form a few of each.
    pub fn crash_images(&self, full: bool) -> Vec<Image> {
        let sim = self.0.lock().unwrap();
        let n = sim.pending.len();
        let subsets: Vec<Vec<bool>> = if n <= if full { 6 } else { 2 } {
            (0..1u32 << n)
                .map(|m| (0..n).map(|i| m >> i & 1 == 1).collect())
                .collect()
        } else {
            // Prefixes, as a journal that keeps its order commits them.
            (0..=n).map(|k| (0..n).map(|i| i < k).collect()).collect()
        };
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for subset in subsets {
            let mut names = sim.durable.clone();
            for (op, &on) in sim.pending.iter().zip(&subset) {
                if !on {
                    continue;
                }
                match op {
                    DirOp::Link(p, i) => {
                        names.insert(p.clone(), *i);
                    }
                    DirOp::Rename(from, to, i) => {
                        names.remove(from);
                        names.insert(to.clone(), *i);
                    }
                    DirOp::Unlink(p) => {
                        names.remove(p);
                    }
                }
            }
            // Each file's possible contents; the product over files.
            let mut images: Vec<Image> = vec![Image::new()];
            for (path, &i) in &names {
                let inode = &sim.inodes[i];
                let variants = contents(inode, full, path);
                let mut next = Vec::with_capacity(images.len() * variants.len());
                for img in &images {
                    for v in &variants {
                        let mut img = img.clone();
                        img.insert(path.clone(), v.clone());
                        next.push(img);
                    }
                }
                images = next;
            }
            for img in images {
                if seen.insert(img.clone()) {
                    out.push(img);
                }
            }
        }
        out
    }

    fn step(&self, what: impl FnOnce() -> String) -> io::Result<(usize, Option<Fail>)> {
        let mut sim = self.0.lock().unwrap();
        if sim.crashed {
            return Err(io::Error::other("the simulated machine has crashed"));
        }
        let i = sim.ops.len();
        sim.ops.push(what());
        let fail = sim.plan.fail_at.filter(|f| f.0 == i).map(|f| f.1);
        Ok((i, fail))
    }

    /// Ends operation `i`: the machine crashes if the plan says so.
    fn done(&self, i: usize) {
        let mut sim = self.0.lock().unwrap();
        if sim.plan.crash_after == Some(i) {
            sim.crashed = true;
        }
    }

    fn dir_op(&self, op: DirOp) {
        let mut sim = self.0.lock().unwrap();
        match &op {
            DirOp::Link(p, i) => {
                sim.names.insert(p.clone(), *i);
            }
            DirOp::Rename(from, to, i) => {
                sim.names.remove(from);
                sim.names.insert(to.clone(), *i);
            }
            DirOp::Unlink(p) => {
                sim.names.remove(p);
            }
        }
        sim.pending.push(op);
    }

    fn ino(&self, path: &Path) -> io::Result<usize> {
        let sim = self.0.lock().unwrap();
        if sim.crashed {
            return Err(io::Error::other("the simulated machine has crashed"));
        }
        sim.names
            .get(path)
            .copied()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, path.display().to_string()))
    }
}

/// The contents a crash may leave in a file: what was synced, everything, and prefixes between (every one
/// in the full form for a log segment, the middle one otherwise); an unsynced truncation is kept or not.
fn contents(inode: &Inode, full: bool, path: &Path) -> Vec<Vec<u8>> {
    let (data, synced) = (&inode.data, &inode.synced);
    if data == synced {
        return vec![data.clone()];
    }
    if !data.starts_with(synced) {
        return vec![synced.clone(), data.clone()];
    }
    let (lo, hi) = (synced.len(), data.len());
    let segment = path.extension().is_some_and(|e| e == "wal");
    let mut lens: BTreeSet<usize> = [lo, hi, lo + (hi - lo) / 2].into();
    if full && segment {
        lens.extend(lo..=hi);
    } else if full {
        lens.extend([lo + 1, hi - 1]);
    }
    lens.into_iter().map(|n| data[..n].to_vec()).collect()
}

struct SimFile {
    sim: SimStorage,
    ino: usize,
    path: PathBuf,
}

impl StorageFile for SimFile {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        let path = self.path.display().to_string();
        let (i, fail) = self
            .sim
            .step(|| format!("write {} bytes to {path}", bytes.len()))?;
        let result = {
            let mut sim = self.sim.0.lock().unwrap();
            let used = sim.used();
            let room = sim.capacity.map(|c| c.saturating_sub(used) as usize);
            if !sim.names.values().any(|&n| n == self.ino) {
                let what = format!("{} bytes to the removed {path}", bytes.len());
                sim.orphan_writes.push(what);
            }
            let inode = &mut sim.inodes[self.ino];
            match (fail, room) {
                (Some(Fail::Eio), _) => Err(Fail::Eio.error()),
                (Some(Fail::NoSpace), _) => {
                    inode.data.extend_from_slice(&bytes[..bytes.len() / 2]);
                    Err(Fail::NoSpace.error())
                }
                (None, Some(room)) if room < bytes.len() => {
                    inode.data.extend_from_slice(&bytes[..room]);
                    Err(Fail::NoSpace.error())
                }
                (None, _) => {
                    inode.data.extend_from_slice(bytes);
                    Ok(())
                }
            }
        };
        self.sim.done(i);
        result
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.sync("fdatasync")
    }

    fn sync_all(&mut self) -> io::Result<()> {
        self.sync("fsync")
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        let path = self.path.display().to_string();
        let (i, fail) = self.sim.step(|| format!("truncate {path} to {len}"))?;
        if let Some(f) = fail {
            return Err(f.error());
        }
        self.sim.0.lock().unwrap().inodes[self.ino]
            .data
            .resize(len as usize, 0);
        self.sim.done(i);
        Ok(())
    }
}

impl SimFile {
    fn sync(&mut self, what: &str) -> io::Result<()> {
        let path = self.path.display().to_string();
        let (i, fail) = self.sim.step(|| format!("{what} {path}"))?;
        if let Some(f) = fail {
            return Err(f.error());
        }
        {
            let mut sim = self.sim.0.lock().unwrap();
            let inode = &mut sim.inodes[self.ino];
            inode.synced = inode.data.clone();
        }
        self.sim.done(i);
        Ok(())
    }
}

impl Storage for SimStorage {
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let (i, fail) = self.step(|| format!("create {}", path.display()))?;
        if let Some(f) = fail {
            return Err(f.error());
        }
        let ino = {
            let mut sim = self.0.lock().unwrap();
            if sim.names.contains_key(path) {
                drop(sim);
                self.done(i);
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    path.display().to_string(),
                ));
            }
            sim.inodes.push(Inode::default());
            sim.inodes.len() - 1
        };
        self.dir_op(DirOp::Link(path.to_path_buf(), ino));
        self.done(i);
        Ok(Box::new(SimFile {
            sim: self.clone(),
            ino,
            path: path.to_path_buf(),
        }))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let ino = self.ino(path)?;
        Ok(Box::new(SimFile {
            sim: self.clone(),
            ino,
            path: path.to_path_buf(),
        }))
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        let ino = self.ino(path)?;
        let data = self.0.lock().unwrap().inodes[ino].data.clone();
        Ok(Box::new(io::Cursor::new(data)))
    }

    fn len(&self, path: &Path) -> io::Result<u64> {
        let ino = self.ino(path)?;
        Ok(self.0.lock().unwrap().inodes[ino].data.len() as u64)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (i, fail) = self.step(|| format!("rename {} to {}", from.display(), to.display()))?;
        if let Some(f) = fail {
            return Err(f.error());
        }
        let ino = self.ino(from)?;
        self.dir_op(DirOp::Rename(from.to_path_buf(), to.to_path_buf(), ino));
        self.done(i);
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let (i, fail) = self.step(|| format!("remove {}", path.display()))?;
        if let Some(f) = fail {
            return Err(f.error());
        }
        self.ino(path)?;
        self.dir_op(DirOp::Unlink(path.to_path_buf()));
        self.done(i);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let (i, fail) = self.step(|| format!("sync directory {}", dir.display()))?;
        if let Some(f) = fail {
            return Err(f.error());
        }
        {
            let mut sim = self.0.lock().unwrap();
            sim.durable = sim.names.clone();
            sim.pending.clear();
        }
        self.done(i);
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let sim = self.0.lock().unwrap();
        if sim.crashed {
            return Err(io::Error::other("the simulated machine has crashed"));
        }
        Ok(sim
            .names
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
            .collect())
    }

    fn free_bytes(&self, _dir: &Path) -> Option<u64> {
        let sim = self.0.lock().unwrap();
        Some(sim.capacity?.saturating_sub(sim.used()))
    }
}

/// One write job of the workload.
#[derive(Clone, Debug)]
enum Job {
    Insert(Vec<(String, String)>),
    Delete(String),
}

/// What a job's client was told, and so what may be on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Told {
    /// Acknowledged: must be there after any crash.
    Acked,
    /// Refused or rolled back: must not be there.
    Absent,
    /// Outcome unknown: there whole or not at all.
    Unknown,
}

/// The documents an index holds: id to text.
type Docs = BTreeMap<String, String>;

/// Words from a small vocabulary, so that texts share shingles and some are near-duplicates.
fn text(i: usize) -> String {
    const WORDS: [&str; 16] = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
        "juliet", "kilo", "lima", "mike", "november", "oscar", "papa",
    ];
    let base = i / 2;
    let mut w: Vec<&str> = (0..14)
        .map(|j| WORDS[(lshbench_core::hash::mix64((base * 31 + j) as u64) % 16) as usize])
        .collect();
    if i % 2 == 1 {
        // A near-duplicate of the text before it.
        w[13] = "zulu";
    }
    w.join(" ")
}

/// The workload: groups of insertions and deletions (one job, one group), enough bytes for two snapshots and
/// a rotation with [`SNAPSHOT_MIN`], an id deleted and inserted again, and a deletion of nothing.
fn workload() -> Vec<Job> {
    let put =
        |ids: &[usize]| Job::Insert(ids.iter().map(|&i| (format!("d{i}"), text(i))).collect());
    vec![
        put(&[0, 1, 2]),
        put(&[3]),
        Job::Delete("d0".into()),
        put(&[4, 5]),
        Job::Delete("nothing".into()),
        put(&[6, 7, 8]),
        Job::Delete("d3".into()),
        put(&[0, 9]),
        put(&[10, 11]),
        put(&[12]),
    ]
}

/// Small enough that the workload takes two snapshots.
const SNAPSHOT_MIN: u64 = 600;

fn choices() -> ParamChoices {
    ParamChoices {
        threshold: Some(0.5),
        num_perm: Some(16),
        ..Default::default()
    }
}

fn options(sim: &SimStorage, snapshot_min_bytes: u64) -> OnlineOptions {
    OnlineOptions {
        snapshot_min_bytes,
        storage: Some(Arc::new(sim.clone())),
        faults: Faults {
            wait_for_snapshots: true,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Runs the workload on a fresh simulated disk that runs `plan`; returns the disk and what each job's client
/// was told (nothing when the index could not even be opened).
fn run(dir: &Path, plan: Plan) -> (SimStorage, Vec<Told>) {
    let sim = SimStorage::new(plan);
    let Ok(index) = OnlineIndex::open(dir, &ParamChoices::default(), options(&sim, SNAPSHOT_MIN))
    else {
        return (sim, Vec::new());
    };
    let told = workload()
        .into_iter()
        .map(|job| {
            let result = match job {
                Job::Insert(docs) => index
                    .insert(
                        docs.into_iter()
                            .map(|(id, text)| DocIn { id, text })
                            .collect(),
                    )
                    .map(drop),
                Job::Delete(id) => index.delete(&id).map(drop),
            };
            match result {
                Ok(()) => Told::Acked,
                Err(WriteError::OutcomeUnknown(_)) => Told::Unknown,
                Err(_) => Told::Absent,
            }
        })
        .collect();
    drop(index);
    (sim, told)
}

fn apply(docs: &mut Docs, job: &Job) {
    match job {
        Job::Insert(new) => {
            for (id, text) in new {
                docs.entry(id.clone()).or_insert_with(|| text.clone());
            }
        }
        Job::Delete(id) => {
            docs.remove(id);
        }
    }
}

/// Every state the jobs may have left: the acknowledged ones applied, each unknown one applied or not.
fn allowed(told: &[Told]) -> Vec<Docs> {
    let jobs = workload();
    let unknown: Vec<usize> = (0..told.len())
        .filter(|&i| told[i] == Told::Unknown)
        .collect();
    (0..1u32 << unknown.len())
        .map(|m| {
            let mut docs = Docs::new();
            for (i, job) in jobs.iter().enumerate().take(told.len()) {
                let on = match told[i] {
                    Told::Acked => true,
                    Told::Absent => false,
                    Told::Unknown => m >> unknown.iter().position(|&u| u == i).unwrap() & 1 == 1,
                };
                if on {
                    apply(&mut docs, job);
                }
            }
            docs
        })
        .collect()
}

/// Every id and text the workload uses, and two for the writes after recovery.
fn all_ids() -> Vec<String> {
    (0..16)
        .map(|i| format!("d{i}"))
        .chain(["p0".into(), "p1".into()])
        .collect()
}

/// The documents `index` holds, in sequence order, with their sequence numbers.
fn held(index: &OnlineIndex) -> Vec<(u64, String, String)> {
    let mut out: Vec<_> = all_ids()
        .into_iter()
        .filter_map(|id| {
            let d = index.get(&id)?;
            Some((d.seq, id, d.text.unwrap_or_default()))
        })
        .collect();
    out.sort();
    out
}

/// Each text's near-duplicates as (id, estimate, jaccard): sequence numbers differ in a rebuilt index.
fn answers(index: &OnlineIndex) -> Answers {
    let queries: Vec<QueryDoc> = (0..16)
        .map(|i| QueryDoc {
            id: None,
            text: text(i),
        })
        .collect();
    index
        .query(&queries)
        .expect("16 queries are within the candidate budget")
        .into_iter()
        .map(|r| {
            r.duplicates
                .into_iter()
                .map(|d| {
                    (
                        d.id,
                        format!("{:.6}", d.estimate),
                        format!("{:?}", d.jaccard),
                    )
                })
                .collect()
        })
        .collect()
}

/// The answers of indexes rebuilt from a list of (id, text), by that list.
type Rebuilt = BTreeMap<Vec<(String, String)>, Answers>;
/// Each text's near-duplicates as (id, estimate, jaccard).
type Answers = Vec<Vec<(String, String, String)>>;

/// Checks one state a crash may leave: recovery opens it; it holds one of the allowed states; its answers
/// are those of an index rebuilt from its documents; and writes after recovery survive a restart.
fn check_state(
    dir: &Path,
    image: &Image,
    told: &[Told],
    rebuilt: &mut Rebuilt,
) -> Result<(), String> {
    let sim = SimStorage::from_image(image);
    // A tiny trigger: the first group after recovery starts a snapshot, whatever the log holds.
    let index = OnlineIndex::open(dir, &ParamChoices::default(), options(&sim, 1))
        .map_err(|e| format!("recovery failed: {e}"))?;
    let docs = held(&index);
    let got: Docs = docs
        .iter()
        .map(|(_, id, t)| (id.clone(), t.clone()))
        .collect();
    let allowed = allowed(told);
    if !allowed.contains(&got) {
        return Err(format!(
            "recovered {:?}, allowed {:?} (told {told:?})",
            got.keys().collect::<Vec<_>>(),
            allowed
                .iter()
                .map(|d| d.keys().collect::<Vec<_>>())
                .collect::<Vec<_>>()
        ));
    }
    let key: Vec<(String, String)> = docs
        .iter()
        .map(|(_, id, t)| (id.clone(), t.clone()))
        .collect();
    let want = rebuilt
        .entry(key.clone())
        .or_insert_with(|| {
            let fresh = tempfile::tempdir().unwrap();
            let sim = SimStorage::default();
            let index = OnlineIndex::create(
                &fresh.path().join("i"),
                &choices(),
                options(&sim, SNAPSHOT_MIN),
            )
            .unwrap();
            for (id, text) in key {
                index.insert(vec![DocIn { id, text }]).unwrap();
            }
            answers(&index)
        })
        .clone();
    if answers(&index) != want {
        return Err("answers differ from those of an index rebuilt from its documents".into());
    }
    // Writes after recovery, the first a group that writes nothing, are kept across a restart.
    let mut after = got.clone();
    index
        .delete("nothing")
        .map_err(|e| format!("after recovery: {e}"))?;
    for id in ["p0", "p1"] {
        index
            .insert(vec![DocIn {
                id: id.into(),
                text: format!("post {id}"),
            }])
            .map_err(|e| format!("after recovery: {e}"))?;
        after.insert(id.into(), format!("post {id}"));
    }
    drop(index);
    let orphans = sim.orphan_writes();
    if !orphans.is_empty() {
        return Err(format!(
            "acknowledged writes to a removed file: {orphans:?}"
        ));
    }
    let index = OnlineIndex::open(dir, &ParamChoices::default(), options(&sim, 1))
        .map_err(|e| format!("the restart after recovery failed: {e}"))?;
    let again: Docs = held(&index).into_iter().map(|(_, id, t)| (id, t)).collect();
    if again != after {
        return Err(format!(
            "after writes and a restart: {:?}, want {:?}",
            again.keys().collect::<Vec<_>>(),
            after.keys().collect::<Vec<_>>()
        ));
    }
    Ok(())
}

/// Damage no crash can cause, at rest in a clean state: every file but the last segment refused with its
/// name, a flip in the last segment refused too or cut as a torn last group (kept in a `.torn` file), and
/// a missing segment or snapshot refused. Returns the states visited.
fn check_damage(dir: &Path, image: &Image, told: &[Told], full: bool) -> Result<usize, String> {
    let last_segment = image
        .keys()
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .max()
        .cloned();
    // Any prefix of the jobs, whole: what cutting a last group may leave.
    let mut prefixes = vec![Docs::new()];
    for (i, job) in workload().iter().enumerate().take(told.len()) {
        let mut d = prefixes.last().unwrap().clone();
        if told[i] == Told::Acked {
            apply(&mut d, job);
        }
        prefixes.push(d);
    }
    let mut states = 0;
    let mut try_open = |bad: &Image, file: &Path, what: &str| -> Result<(), String> {
        states += 1;
        let sim = SimStorage::from_image(bad);
        match OnlineIndex::open(dir, &ParamChoices::default(), options(&sim, SNAPSHOT_MIN)) {
            Err(OpenError::Recovery(RecoveryError::Damaged { path, .. })) if path == file => Ok(()),
            Err(e) => Err(format!(
                "{what}: not refused as damage of {}: {e}",
                file.display()
            )),
            Ok(index) if Some(file) == last_segment.as_deref() && what.starts_with("byte") => {
                let got: Docs = held(&index).into_iter().map(|(_, id, t)| (id, t)).collect();
                let r = index.recovery();
                if r.cut_bytes > 0 && r.torn_files.len() == 1 && prefixes.contains(&got) {
                    Ok(())
                } else {
                    Err(format!(
                        "{what}: opened with {:?}, cut {}",
                        got.keys(),
                        r.cut_bytes
                    ))
                }
            }
            Ok(index) => Err(format!("{what}: opened with {} documents", index.len())),
        }
    };
    for (path, data) in image {
        let name = path.file_name().unwrap().to_string_lossy();
        if !(name.ends_with(".wal") || name.ends_with(".snap")) || data.is_empty() {
            continue;
        }
        let offsets: Vec<usize> = if full {
            (0..data.len()).collect()
        } else {
            let mut o: BTreeSet<usize> = [0, 17, 21, 25, data.len() - 1].into();
            o.extend((0..data.len()).step_by(data.len() / 7 + 1));
            o.into_iter().filter(|&o| o < data.len()).collect()
        };
        for at in offsets {
            for (how, new) in [("flipped", data[at] ^ 0x01), ("zeroed", 0)] {
                if new == data[at] {
                    continue;
                }
                let mut bad = image.clone();
                bad.get_mut(path).unwrap()[at] = new;
                try_open(&bad, path, &format!("byte {at} of {name} {how}"))?;
            }
        }
    }
    // A missing segment: every segment of the log after the newest snapshot but the last, then the snapshot
    // when it is the only one and the log does not start at 1.
    let seq_of = |p: &Path, prefix: &str, suffix: &str| {
        log::parse_name(&p.file_name()?.to_string_lossy(), prefix, suffix)
    };
    let snapshots: Vec<&PathBuf> = image
        .keys()
        .filter(|p| seq_of(p, "snapshot-", ".snap").is_some())
        .collect();
    let base = snapshots
        .iter()
        .filter_map(|p| seq_of(p, "snapshot-", ".snap"))
        .max()
        .unwrap_or(0);
    let chain: Vec<&PathBuf> = image
        .keys()
        .filter(|p| seq_of(p, "log-", ".wal").is_some_and(|s| s > base))
        .collect();
    for i in 0..chain.len().saturating_sub(1) {
        let mut bad = image.clone();
        bad.remove(chain[i]);
        // Named as missing (the first) or as the segment after the gap.
        let named = if i == 0 { chain[0] } else { chain[i + 1] };
        try_open(&bad, named, &format!("{} missing", chain[i].display()))?;
    }
    if let [snap] = snapshots[..]
        && chain
            .first()
            .is_some_and(|p| seq_of(p, "log-", ".wal") != Some(1))
    {
        let mut bad = image.clone();
        bad.remove(snap);
        try_open(
            &bad,
            &dir.join(log::segment_name(1)),
            "the snapshot missing",
        )?;
    }
    Ok(states)
}

/// What an enumeration visited.
#[derive(Debug, Default)]
struct Visited {
    operations: usize,
    crash_states: usize,
    /// States left by a crash, or a failure and a crash, during the recovery of a crash state.
    recovery_crash_states: usize,
    failure_states: usize,
    damage_states: usize,
}

fn enumerate(full: bool) -> Visited {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("i");
    drop(
        OnlineIndex::create(
            &dir,
            &choices(),
            options(&SimStorage::default(), SNAPSHOT_MIN),
        )
        .unwrap(),
    );
    let (reference, told) = run(&dir, Plan::default());
    assert!(told.iter().all(|&t| t == Told::Acked), "{told:?}");
    assert_eq!(reference.orphan_writes(), Vec::<String>::new());
    let ops = reference.ops();
    let renamed = ops
        .iter()
        .filter(|o| o.starts_with("rename") && o.ends_with(".snap"))
        .count();
    let created = ops
        .iter()
        .filter(|o| o.starts_with("create") && o.ends_with(".wal"))
        .count();
    assert!(
        renamed >= 2 && created >= 2,
        "two snapshots and a rotation: {ops:#?}"
    );
    let mut v = Visited {
        operations: ops.len(),
        ..Visited::default()
    };
    let mut rebuilt = BTreeMap::new();
    let mut multi_segment: Option<(Image, Vec<Told>)> = None;
    for (i, op) in ops.iter().enumerate() {
        let (sim, told) = run(
            &dir,
            Plan {
                crash_after: Some(i),
                ..Plan::default()
            },
        );
        for image in sim.crash_images(full) {
            v.crash_states += 1;
            if let Err(e) = check_state(&dir, &image, &told, &mut rebuilt) {
                panic!("crash after operation {i} ({op}): {e}");
            }
            // A second crash during this state's recovery, after each of its operations; or that operation
            // failing (the open may then fail), and a crash after the attempt.
            let probe = SimStorage::from_image(&image);
            drop(OnlineIndex::open(
                &dir,
                &ParamChoices::default(),
                options(&probe, SNAPSHOT_MIN),
            ));
            let recovery_ops = probe.ops();
            let plans = (0..recovery_ops.len()).flat_map(|j| {
                [
                    Plan {
                        crash_after: Some(j),
                        ..Plan::default()
                    },
                    Plan {
                        fail_at: Some((j, Fail::Eio)),
                        ..Plan::default()
                    },
                    Plan {
                        fail_at: Some((j, Fail::NoSpace)),
                        ..Plan::default()
                    },
                ]
            });
            for plan in plans {
                let j = plan.crash_after.or(plan.fail_at.map(|f| f.0)).unwrap();
                let rop = &recovery_ops[j];
                let sim = SimStorage::from_image(&image).with_plan(plan);
                drop(OnlineIndex::open(
                    &dir,
                    &ParamChoices::default(),
                    options(&sim, SNAPSHOT_MIN),
                ));
                for again in sim.crash_images(full) {
                    v.recovery_crash_states += 1;
                    if let Err(e) = check_state(&dir, &again, &told, &mut rebuilt) {
                        panic!(
                            "crash after operation {i} ({op}), then {plan:?} ({rop}) in recovery: {e}"
                        );
                    }
                }
            }
            let segments = image
                .keys()
                .filter(|p| p.extension().is_some_and(|e| e == "wal"));
            if multi_segment.is_none() && segments.count() >= 2 {
                multi_segment = Some((image, told.clone()));
            }
        }
    }
    for (i, op) in ops.iter().enumerate() {
        for fail in [Fail::Eio, Fail::NoSpace] {
            let (sim, told) = run(
                &dir,
                Plan {
                    fail_at: Some((i, fail)),
                    ..Plan::default()
                },
            );
            for image in sim.crash_images(full) {
                v.failure_states += 1;
                if let Err(e) = check_state(&dir, &image, &told, &mut rebuilt) {
                    panic!("{fail:?} at operation {i} ({op}), then a crash: {e}");
                }
            }
        }
    }
    let clean = reference.image();
    v.damage_states += check_damage(&dir, &clean, &told, full).unwrap();
    let (image, told) = multi_segment.expect("a crash leaves two segments");
    v.damage_states += check_damage(&dir, &image, &told, full).unwrap();
    v
}

#[test]
fn every_crash_point_and_every_failure_keeps_the_durability_promises() {
    let full = std::env::var("LSHBENCH_CRASH_FULL").is_ok_and(|v| v == "1");
    let t0 = Instant::now();
    let v = enumerate(full);
    println!(
        "{} enumeration: {} operations; {} crash states, {} after a crash or failure in recovery, {} failure \
         states, {} damaged states ({} in all) in {:.1} s",
        if full { "full" } else { "quick" },
        v.operations,
        v.crash_states,
        v.recovery_crash_states,
        v.failure_states,
        v.damage_states,
        v.crash_states + v.recovery_crash_states + v.failure_states + v.damage_states,
        t0.elapsed().as_secs_f64()
    );
}

#[test]
fn a_snapshot_that_cannot_fit_is_not_started_and_leaves_no_segment_behind() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("i");
    let sim = SimStorage::default();
    let write = |index: &OnlineIndex, i: usize| {
        index.insert(vec![DocIn {
            id: format!("d{i}"),
            text: text(i),
        }])
    };
    {
        let index = OnlineIndex::create(&dir, &choices(), options(&sim, 1 << 30)).unwrap();
        for i in 0..12 {
            write(&index, i).unwrap();
        }
    }
    // A tiny trigger: every group after a restart asks for a snapshot of everything.
    let reopen = || OnlineIndex::open(&dir, &ParamChoices::default(), options(&sim, 1)).unwrap();
    let attempts = |sim: &SimStorage| {
        let ops = sim.ops();
        let created = |suffix: &str| {
            ops.iter()
                .filter(|o| o.starts_with("create") && o.ends_with(suffix))
                .count()
        };
        (created(".wal"), created(".snap.tmp"))
    };
    let segments = |sim: &SimStorage| {
        sim.image()
            .keys()
            .filter(|p| p.extension().is_some_and(|e| e == "wal"))
            .count()
    };
    // The writer looks at the snapshot policy after answering a group: an answer to a later job (here a
    // deletion of nothing) comes after the policy ran for every group before it.
    let settle = |index: &OnlineIndex| index.delete("nothing").unwrap();
    // A full disk: writes are refused, and no snapshot or rotation is tried.
    sim.set_capacity(Some(sim.used() + 40));
    let index = reopen();
    let before = attempts(&sim);
    for i in 12..17 {
        let e = write(&index, i).unwrap_err();
        assert_eq!(e.status(), 507, "{e}");
    }
    settle(&index);
    assert_eq!(
        attempts(&sim),
        before,
        "a snapshot was tried on a full disk"
    );
    // Some space again, less than a snapshot needs: the writes go on, no snapshot takes the space, and no
    // segment is left behind by a failed rotation.
    sim.set_capacity(Some(sim.used() + 1200));
    let segments_before = segments(&sim);
    for i in 12..15 {
        write(&index, i).unwrap();
    }
    settle(&index);
    assert_eq!(
        attempts(&sim),
        before,
        "a snapshot that cannot fit was started"
    );
    assert_eq!(segments(&sim), segments_before);
    // With room, the snapshot is taken, and replaces the segments.
    sim.set_capacity(None);
    write(&index, 15).unwrap();
    settle(&index);
    assert!(index.stats().snapshot.is_some());
    assert_eq!(segments(&sim), 1);
    drop(index);
    assert_eq!(reopen().len(), 16);
}
