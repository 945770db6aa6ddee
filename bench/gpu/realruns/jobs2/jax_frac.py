import jax
import jax.numpy as jnp


def make_batch(key, n):
    return jax.random.normal(key, (n, 4096))


def main():
    print("devices", jax.devices())
    x = make_batch(jax.random.PRNGKey(0), 65536)
    w = jnp.ones((4096, 4096))
    print((x @ w).sum())


if __name__ == "__main__":
    main()
