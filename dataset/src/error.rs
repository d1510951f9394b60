//! Errors that point at the exact place in the file.

use std::fmt;
use std::path::PathBuf;

/// One problem in a dataset file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetError {
    /// The dataset file.
    pub path: PathBuf,
    /// 1-based line in the file, when the problem is on a line.
    pub line: Option<usize>,
    /// The conversation, when the problem is in one.
    pub conversation: Option<String>,
    /// The field, when the problem is in one.
    pub field: Option<String>,
    /// What was expected and what was found.
    pub message: String,
}

impl fmt::Display for DatasetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        f.write_str(": ")?;
        if let Some(c) = &self.conversation {
            write!(f, "conversation {c:?}: ")?;
        }
        if let Some(field) = &self.field {
            write!(f, "field `{field}`: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for DatasetError {}

/// Every problem found in one file (loading reports them all, not just the first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetErrors(pub Vec<DatasetError>);

impl DatasetErrors {
    /// How many errors `Display` prints before summarising the rest.
    pub const SHOWN: usize = 50;
}

impl fmt::Display for DatasetErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().take(Self::SHOWN).enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        if self.0.len() > Self::SHOWN {
            write!(f, "\n... and {} more errors", self.0.len() - Self::SHOWN)?;
        }
        Ok(())
    }
}

impl std::error::Error for DatasetErrors {}
