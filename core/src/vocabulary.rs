//! Closed vocabularies declared once: [`vocabulary!`] turns one enum declaration — each
//! variant with its one-line doc comment and the name written in files — into the enum, its
//! list in declaration order (`ALL`), its name (`as_str`), its meaning (`meaning`, the doc
//! comment's text) and its position (`index`). docs/records.md's tables are tested against
//! these lists, so a name or a meaning is written in one place.

/// Declares a fieldless enum whose variants each have one `///` line and a name:
///
/// ```
/// tokentap_core::vocabulary! {
///     #[derive(Debug, Clone, Copy, PartialEq)]
///     pub enum Fruit {
///         /// round and red
///         Apple = "apple",
///         /// long and yellow
///         Banana = "banana",
///     }
/// }
/// assert_eq!(Fruit::ALL, [Fruit::Apple, Fruit::Banana]);
/// assert_eq!(Fruit::Banana.as_str(), "banana");
/// assert_eq!(Fruit::Apple.meaning(), "round and red");
/// assert_eq!(Fruit::parse("banana"), Some(Fruit::Banana));
/// assert_eq!(Fruit::Banana.index(), 1);
/// ```
#[macro_export]
macro_rules! vocabulary {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                #[doc = $doc:literal]
                $(#[$vmeta:meta])*
                $variant:ident = $text:literal,
            )+
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $(
                #[doc = $doc]
                $(#[$vmeta])*
                $variant,
            )+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: [$name; [$(stringify!($variant)),+].len()] = [$($name::$variant),+];

            /// The name written in files and used as a metric label.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// What it means, in one line (its doc comment).
            pub fn meaning(self) -> &'static str {
                match self {
                    $($name::$variant => $doc.trim_start(),)+
                }
            }

            /// Its position in [`Self::ALL`] (for count arrays).
            pub fn index(self) -> usize {
                self as usize
            }

            /// The value named `s`, if it is one of the vocabulary.
            pub fn parse(s: &str) -> Option<$name> {
                Self::ALL.into_iter().find(|v| v.as_str() == s)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    /// A vocabulary that is also written by serde is written by its one name: the serde name of
    /// every value is its `as_str`, and it reads back.
    fn serde_is_the_name<T>(all: &[T], name: fn(&T) -> &'static str)
    where
        T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        for v in all {
            let text = serde_json::to_string(v).unwrap();
            assert_eq!(text, format!("\"{}\"", name(v)), "{v:?}");
            assert_eq!(&serde_json::from_str::<T>(&text).unwrap(), v);
        }
    }

    #[test]
    fn serde_names_are_the_vocabularys() {
        use crate::chunk::FinishReason;
        use crate::record::{CountSource, ErrorSource, RxClock, Status};
        use crate::timeline::TokenSource;
        serde_is_the_name(&Status::ALL, |v| v.as_str());
        serde_is_the_name(&ErrorSource::ALL, |v| v.as_str());
        serde_is_the_name(&RxClock::ALL, |v| v.as_str());
        serde_is_the_name(&CountSource::ALL, |v| v.as_str());
        serde_is_the_name(&FinishReason::ALL, |v| v.as_str());
        serde_is_the_name(&TokenSource::ALL, |v| v.as_str());
    }
}
