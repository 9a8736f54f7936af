"""Test vectors made by Java (not by kafkalog), pinning the wire details of encrypted Aiven archives.

Made once with a small Java 17 program on this machine: a fresh 2048-bit RSA key pair (a throwaway test key,
protecting nothing); the data key bytes 0..31 wrapped with SunJCE's ``RSA/ECB/OAEPPadding`` initialised with
``OAEPParameterSpec("SHA3-512", "MGF1", new MGF1ParameterSpec("SHA3-512"), PSource.PSpecified.DEFAULT)`` --
exactly the spec BouncyCastle's ``CipherSpi.engineSetPadding`` builds for the plugin's
``RSA/NONE/OAEPWithSHA3-512AndMGF1Padding`` (BouncyCastle itself is not on this machine, so the mapping was
read from its source, not run); and ``"kafkalog tiered chunk"`` encrypted with ``AES/GCM/NoPadding``,
``GCMParameterSpec(128, iv)`` with iv bytes 100..111 and ``updateAAD(aad)`` with aad bytes 200..231, the IV
prepended as ``EncryptionChunkEnumeration`` does.
"""

JAVA_PRIVATE_KEY_PEM = """\
-----BEGIN PRIVATE KEY-----
MIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQC4AIiUTGOaAe0N
xIUwQznro1xQ9foKdIKwQUhU9LURX/Y1QtU9ZEaF1T9yQ+mj7xEJqfYdQZPEsUL8
e6eLEm3XEprp7rqYuiUtRo4e4zvdAdCPicJbT72mptP0w2XZ5fLAHYEaZ3rl8Zri
brwAhsEYnZbZIx8ZI4VuRXhmikVAz7qq5xwHFKogG8B+Gz1wNFhoHcVbd1g0Kmdx
bi8wxpFa4B/1WZCszAzmMxP21jtzQnkX6zeYmIwKrEJRHltSyyR4jczZN5tD5GJn
Gr9PPzG6Yk9huNGt9Txxe05CpdmRKOFXHcJERX7yUvBpiLQbXEFNOI3vh4uZglEw
haJb+QiPAgMBAAECggEAEi6bUGwr+2/tSMr+jkJWWt6NpMJprtbMgzYwO5Tiv5DH
94NfJu3duiPUXSow0C4zdM0CsOll/K23fNOLPsbXa8U+4ZbhgW4DdnHeYVb691/S
iByIxBUhHHKnxyv3yIxcbHd95moLTuWM9IsUsMigFBqeaV57GDTWXosm1psbNMgn
OO7wYG0+qLPyXo9aDYsIrdiBfXMuQbApMKlanzBt/qZqfOk/M0tYjZqgTpC40fBF
DRnerJsMLsv3uE1G+XMoYWT/0MO3SPbitvAFWsEEdi5m39NWShwcZC8opPzPQEBA
utH/X0JSoCcZzfZMpGXZ85SuxsLgv2BlDKnKcvW4QQKBgQDXRZJmelIZpT1PVnbu
8fOUCvaA2bqiWsqkvPFz0fxX3dR7aGLlLJsd1d+bAtOsEVJjVprEeym7TeE9xUn1
PwkBE4Iz1mL2ugBYcSgbzJQJ/jjhXvCvGE6drq8Zku6bv5YwBfOYanKFLTvazKcf
EyEFQEzzWtZuPZxyqnRsRqmziQKBgQDa0HPOt2ORqv5C4lDzshL7Ww0Lqd+qvwe7
FShSq/25wxPR9VWyb83MFMkysyOhxxfQSQadjVC9sJyWo/ukRQIa/g2a/zZcP/Y8
VGWVAvhZk0DKRCgwmarKZBmnKUEdXJUGlOQvz1IwilvKTflbDYJL9tZSf8EavWoK
6gvexSKdVwKBgGUQlJrn8oN3wEDvJwcnMGPggbocfjKazWhqDDGD9CSMUKVfbI6L
Uoe/UStFOHsf5r4ceqyj5gO5nHWTmhU5ctC+h/IuRGfxCxh6h4oFkbrfT3T/TZ/m
mYIN8Mbg5ITafXguUx7LWtiLU/509kDwiiAdAAOAMguvgTOUMvRieGmBAoGBAM2z
Enss6TxiO95SdPly2OdUZAIn8qzIIpNbw2lcaAw+eB5zfNlew19r1uyDfSazTA6w
57gqxdFc+weeJoz5lo4bcFzaOJcmRevXBxu7DA7hIBJFWma9vtG+omMDpEPe6fWi
+JR9WG1rU/jtrlFLdMbGyBoMIVNq5wpVlU0Zk33HAoGBANXQoncEI49LG1ECh1DD
lKLZyIVE9EJmaRk5/pjd+JeBRCVAV/yA5dhjOQVVnG95JAbHgkTZSam40+Awjgrz
JZT8m2rO/ZtTuYvGGfvHrHncymBDMpc31cXuq/M5X2e/djxrQO/tu1nO+q/mGue0
7N3uaTz+kqD+Bnxqo2Bu2juU
-----END PRIVATE KEY-----
"""
JAVA_WRAPPED_DEK = (
    "si/Oy0LfFqPftgxjjsINTDDxQ0gHwr2IMfRonHOlNECzKMfbPLvHLWa5I09NfEphsq7+mMEwCm0hvl6JpQr1gimgeouA7dwe+kDl"
    "uKSjfV9PDvc24Ujc92nN7CDVElMBZPFC5+qBY/qLr7GTglaK2A04lGO9ZJWd+fUYkugKk30ORlm3Bob/bypx/8TwxDYdt78QyG86"
    "WZF6Y1YGC52rkRdCJec0Xe/+MCGhxl3BFzf1+2keV4R+j/KkX92uQaTAoVYNX5V+aoUjKru/0pGhHBiQcq6uoiiOW/Isy3gurkvZ"
    "RllHVHjmsm9W90a6/WpfUxDSaUKcym861AUx9e+dcw=="
)
JAVA_GCM_CHUNK = "ZGVmZ2hpamtsbW5vI3q4DRiFOfkeFjaNqAAO3SGqc2Tg63tgpLACgNdqNWod65zBMg=="
JAVA_GCM_AAD = "yMnKy8zNzs/Q0dLT1NXW19jZ2tvc3d7f4OHi4+Tl5uc="
